import sys, torch, pickletools, io
import types
hb = types.ModuleType("heavyball"); hb.ForeachAdamW = type("ForeachAdamW", (), {}); hb.ForeachSOAP = type("ForeachSOAP", (), {}); sys.modules["heavyball"] = hb
sd = torch.load(sys.argv[1], weights_only=False)
def desc(v):
    if isinstance(v, torch.Tensor): return f"T{list(v.shape)}{str(v.dtype)[6:]}"
    if isinstance(v, (list, tuple)): return type(v).__name__ + "[" + ", ".join(desc(x) for x in v) + "]"
    if isinstance(v, dict): return type(v).__name__ + "{" + ", ".join(f"{k!r}: {desc(x)}" for k, x in v.items()) + "}"
    return repr(v)[:80]
for k, v in list(sd["state"].items())[:3]: print(repr(k)[:50], desc(v))
print(desc(sd["param_groups"][0])); print(desc(sd["heavyball"]))
try:
    torch.load(sys.argv[1], weights_only=True); print("weights_only ok")
except Exception as e: print("weights_only:", str(e)[:300])
