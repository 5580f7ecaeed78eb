"""The errors raised by `twinflow.models`; the tree is drawn in the package docstring."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from twinflow.trace import TwinflowError, UserError

if TYPE_CHECKING:
    from twinflow.models._preflight import PreflightReport

SchemaReason = Literal["unenforced", "uncompilable"]
SetupReason = Literal["name", "not-installed", "dialect", "mode"]
ResponseReason = Literal["malformed", "refused"]


class ModelError(TwinflowError):
    """Root of the errors raised by `twinflow.models`."""


class SchemaError(ModelError, UserError):
    """A schema refused before any request, for the reason `reason` names.

    `unenforced`: strict pre-flight found keywords the target decoder would not enforce
    (`report` lists them). `uncompilable`: the decoder's converter turns the schema into a
    grammar its server cannot compile (llama-cpp-python's server crashes on one), so it is
    never sent; `report` is None.

    Attributes:
        reason: `unenforced` or `uncompilable`.
        report: The pre-flight report that refused the schema (`unenforced` only).
    """

    def __init__(
        self, message: str, *, reason: SchemaReason, report: PreflightReport | None = None
    ) -> None:
        """Create the error.

        Args:
            message: What was refused and what to do.
            reason: `unenforced` or `uncompilable`.
            report: The pre-flight report, for `unenforced`.
        """
        super().__init__(message)
        self.reason: SchemaReason = reason
        self.report = report

    @classmethod
    def unenforced(cls, report: PreflightReport) -> SchemaError:
        """The strict pre-flight refusal of a schema, naming every finding of `report`."""
        listed = "; ".join(
            f"{f.keyword} at {f.pointer or '/'}: {f.reason}" for f in report.findings
        )
        return cls(
            f"strict pre-flight: the {report.decoder} decoder would not enforce "
            f"{len(report.findings)} part(s) of the schema ({listed}); drop those keywords, or "
            "pass strict=False to rely on the second validation with pydantic",
            reason="unenforced",
            report=report,
        )


class ModelSetupError(ModelError, UserError):
    """A model could not be set up as asked, for the reason `reason` names.

    `name`: `open_model` does not know the name's provider, or the name is malformed.
    `not-installed`: the embedded model's extra (llama-cpp-python, the SmolLM2 file) is missing.
    `dialect`, `mode`: an OpenAI-compatible dialect or a chat mode this package does not know.

    Attributes:
        reason: `name`, `not-installed`, `dialect` or `mode`.
    """

    def __init__(self, message: str, *, reason: SetupReason) -> None:
        """Create the error.

        Args:
            message: What was wrong and what to do.
            reason: Which setup step failed.
        """
        super().__init__(message)
        self.reason: SetupReason = reason


class InputRefused(ValueError):
    """Internal: input one of this package's readers turns down; the message says why.

    `parse_action` raises it for an emission that parsed as JSON but is not one of the offered
    actions, `grammar_pattern` for a regex construct no grammar converter reads (lookaround,
    backreference...). It never leaves the package: the caller records a refused attempt or
    drops the pattern.
    """


class MalformedResponseError(ModelError):
    """The server answered with a success status but a body that is not its documented wire
    format (reason `malformed`), or one that withholds the answer (reason `refused`: a
    provider's safety or policy block, such as Gemini's `blockReason` or `finishReason: SAFETY`).

    Attributes:
        url: The endpoint that answered.
        path: JSON pointer (RFC 6901) to the part of the body that was missing, wrong or the block.
        reason: `malformed` or `refused`.
    """

    def __init__(
        self, message: str, *, url: str, path: str, reason: ResponseReason = "malformed"
    ) -> None:
        """Create the error.

        Args:
            message: What was expected and what was found.
            url: The endpoint that answered.
            path: JSON pointer to the offending part of the body.
            reason: `malformed` (not the wire format) or `refused` (an answer withheld).
        """
        hint = (
            "check that the server speaks the dialect this client was configured with"
            if reason == "malformed"
            else "the provider refused to answer; rephrase the request or use another model"
        )
        super().__init__(f"{message} (at {path or '/'} in the response from {url}); {hint}")
        self.url = url
        self.path = path
        self.reason: ResponseReason = reason
