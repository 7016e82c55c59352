"""safe_load: torch.load only after optstate's validate passes.

The one line that matters in a training script, ``torch.load(path)``, becomes
``optstate.safe_load(path)``: the file is checked first without running any of
its pickle code (every global it names, how its pickles are built, what
torch.load would read of it), and loaded with ``weights_only=True`` only when
no rule at error severity fires. torch is imported only here.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, Iterator, List, Optional, Union

from optstate._errors import UnsafeCheckpoint

PathLike = Union[str, "os.PathLike[str]"]


def _check(path: PathLike, rules: Optional[PathLike], no_values: bool) -> Dict[str, Any]:
    from optstate import validate  # the package's own, imported late: it imports this module
    report = validate(path, rules=rules, no_values=no_values)
    if not report.get("passed", False):
        raise UnsafeCheckpoint(report)
    return report


def safe_load(path: PathLike, *, rules: Optional[PathLike] = None, no_values: bool = False,
              **kwargs: Any) -> Any:
    """Validates `path`, then returns ``torch.load(path, weights_only=True, **kwargs)``.

    Raises UnsafeCheckpoint (with the report and its error findings) instead of
    loading when validation fails, and optstate.Error when the file cannot be
    read at all. Tensor bytes are read too (CRCs, non-finite values), as
    ``optstate validate`` does; ``no_values=True`` checks structure only.
    ``rules``: a rules file, as for ``optstate validate``.
    """
    _check(path, rules, no_values)
    import torch
    kwargs.setdefault("weights_only", True)
    return torch.load(os.fspath(path), **kwargs)


def safe_load_dir(path: PathLike, *, rules: Optional[PathLike] = None, no_values: bool = False,
                  **kwargs: Any) -> Dict[str, Any]:
    """Validates a checkpoint directory (HF Trainer, accelerate, DCP, ZeRO) as
    ``optstate validate DIR`` does, then loads each torch.save file the report
    names with ``weights_only=True``: {path: object}. Files the frameworks read
    otherwise (safetensors, JSON, DCP's .distcp) are checked, not loaded."""
    report = _check(path, rules, no_values)
    import torch
    kwargs.setdefault("weights_only", True)
    loaded: Dict[str, Any] = {}
    entries: List[Dict[str, Any]] = list(report.get("files", []))
    for entry in entries:
        file_report = entry.get("report", {})
        if file_report.get("format") in ("zip", "legacy"):
            loaded[entry["path"]] = torch.load(entry["path"], **kwargs)
    return loaded


@contextlib.contextmanager
def checked_torch_load(*, rules: Optional[PathLike] = None, no_values: bool = False) -> Iterator[None]:
    """Within the block, every ``torch.load`` of a path (code that calls it
    itself: a framework's resume, a library's from_pretrained) validates the
    file first and raises UnsafeCheckpoint instead of loading when it fails;
    ``weights_only`` defaults to True. A file object cannot be checked by path:
    it is loaded with ``weights_only=True`` whatever the caller asked. The
    original ``torch.load`` is back when the block ends, however it ends."""
    import torch
    original = torch.load

    def checked(f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, os.PathLike)):
            _check(f, rules, no_values)
            kwargs.setdefault("weights_only", True)
        else:
            kwargs["weights_only"] = True
        return original(f, *args, **kwargs)

    torch.load = checked
    try:
        yield
    finally:
        torch.load = original
