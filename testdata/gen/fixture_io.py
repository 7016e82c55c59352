"""What the fixture generators share when they write: JSON as every committed
truth file and index is kept (indent 1, a final newline), so that a rerun that
changes nothing leaves git with nothing to show."""

import json


def write_json(path, doc, **options):
    """Writes doc to path; options go to json.dump (sort_keys, ensure_ascii)."""
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, **options)
        f.write("\n")
