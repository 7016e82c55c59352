"""Every JSON file the project reads from testdata/ validates against its schema
in schemas/, and every schema is itself a valid JSON Schema (draft 2020-12).
Ends with 'N passed, N failed'."""
import glob
import json
import os
import sys

import jsonschema

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    schemas = {os.path.basename(p): load(p) for p in glob.glob(os.path.join(REPO, "schemas", "*.json"))}
    passed = failed = 0
    for name, schema in sorted(schemas.items()):
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
            passed += 1
        except jsonschema.SchemaError as e:
            failed += 1
            print(f"FAIL schemas/{name}: {e.message}")
    rules = [("*.manifest.json", "param-manifest.schema.json"),
             ("*.truth.json", "fixture-truth.schema.json"),
             ("fsdp2_*dcp.expected.json", "dcp-fixture-expected.schema.json"),
             ("*.expected.json", "fixture-expected.schema.json"),
             ("fsdp1_*/*/truth.rank*.json", "heavyball-fsdp1-run-truth.schema.json"),
             ("truth.rank*.json", "heavyball-run-truth.schema.json"),
             ("fsdp2_tp_*/truth.rank*.json", "heavyball-tp-run-truth.schema.json"),
             ("migrate/*/*/truth.json", "heavyball-migrate-truth.schema.json"),
             ("migrate/*/*/manifest.json", "param-manifest.schema.json"),
             ("migrate/resume.json", "heavyball-resume.schema.json"),
             ("torchload/cases.json", "hostile-torchload-cases.schema.json"),
             ("torchload/markers.*.json", "hostile-torchload-markers.schema.json"),
             ("hf_training_args/real_files.json", "hf-training-args-real.schema.json")]
    seen = set()
    for pattern, schema_name in rules:
        paths = glob.glob(os.path.join(REPO, "testdata", "good", "*", pattern))
        paths += glob.glob(os.path.join(REPO, "testdata", "validate", pattern))
        paths += glob.glob(os.path.join(REPO, "tests", "cli", "inputs", pattern))
        if pattern.startswith("torchload/"):
            paths += glob.glob(os.path.join(REPO, "testdata", "hostile", pattern))
        elif pattern.startswith("hf_training_args/"):
            paths += glob.glob(os.path.join(REPO, "testdata", "frameworks", pattern))
        elif "/" in pattern:
            paths += glob.glob(os.path.join(REPO, "testdata", "heavyball", pattern))
        else:
            paths += glob.glob(os.path.join(REPO, "testdata", "heavyball", "*", "*", pattern))
        for path in sorted(paths):
            if path in seen:
                continue
            seen.add(path)
            rel = os.path.relpath(path, REPO)
            try:
                jsonschema.Draft202012Validator(schemas[schema_name]).validate(load(path))
                passed += 1
            except jsonschema.ValidationError as e:
                failed += 1
                print(f"FAIL {rel} against {schema_name}: {e.message[:300]} at {list(e.absolute_path)}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed < 10 else 0


if __name__ == "__main__":
    sys.exit(main())
