"""The exceptions optstate raises: one per Status code of the library (the
"code" of schemas/error.schema.json), and the refusals of the checks."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping


class Error(Exception):
    """optstate could not do the job. ``code`` is the machine-readable code
    ("not_found", "corrupt", ...); ``message`` names the file and, below it,
    the record and byte offset where the library found the problem."""

    code = "error"

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class TruncatedError(Error):
    code = "truncated"


class CorruptError(Error):
    code = "corrupt"


class UnsupportedError(Error):
    code = "unsupported"


class LimitExceededError(Error):
    code = "limit_exceeded"


class IoError(Error, OSError):
    code = "io_error"


class InvalidArgumentError(Error, ValueError):
    code = "invalid_argument"


class NotFoundError(Error, FileNotFoundError):
    code = "not_found"


class InternalError(Error):
    code = "internal"


class CancelledError(Error):
    code = "cancelled"


class Refused(Error):
    """remap or migrate refused to write (state it cannot attribute, or nothing
    that would carry over); nothing was written. ``code`` says why as above."""


class CheckpointInvalid(Error):
    """validate(strict=True) found errors; ``report`` is the whole report."""

    code = "findings"

    def __init__(self, report: Dict[str, Any]) -> None:
        self.report = report
        self.findings: List[Dict[str, Any]] = [f for f in error_findings(report)]
        rules = sorted({str(f.get("rule")) for f in self.findings})
        where = report.get("input") or report.get("path") or "checkpoint"
        super().__init__(f"{where}: {len(self.findings)} error finding(s): {', '.join(rules)}")


def error_findings(report: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The findings at error severity of a validate report, a directory's
    included (each file's report, the ZeRO layout's)."""
    found = [dict(f) for f in report.get("findings", []) if f.get("severity") == "error"]
    for entry in report.get("files", []):
        found += error_findings(entry.get("report", {}))
    if "zero_layout" in report:
        found += error_findings(report["zero_layout"])
    return found


class UnsafeCheckpoint(CheckpointInvalid):
    """safe_load refused a file: validate's report fails, so torch.load is not called."""


_BY_CODE = {cls.code: cls for cls in (TruncatedError, CorruptError, UnsupportedError, LimitExceededError,
                                      IoError, InvalidArgumentError, NotFoundError, InternalError, CancelledError)}


def error_from_document(error: Mapping[str, Any], refused: bool = False) -> Error:
    """The exception for a {"code", "message"} document (schemas/error.schema.json)."""
    code = str(error.get("code", "internal"))
    message = str(error.get("message", ""))
    if refused:
        return Refused(message, code)
    return _BY_CODE.get(code, Error)(message, code)
