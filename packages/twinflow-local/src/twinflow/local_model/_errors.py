"""The errors raised by `twinflow.local_model`; the tree is drawn in the package docstring."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinflow.trace import TwinflowError, UserError

if TYPE_CHECKING:
    from twinflow.local_model._preflight import PreflightReport


class LocalModelError(TwinflowError):
    """Root of the errors raised by `twinflow.local_model`."""


class UnenforcedSchemaError(LocalModelError, UserError):
    """Strict pre-flight refused a schema whose keywords the target decoder would not enforce.

    Attributes:
        report: The pre-flight report listing every keyword the decoder would not enforce.
    """

    def __init__(self, report: PreflightReport) -> None:
        """Create the error from the report that refused the schema.

        Args:
            report: The pre-flight report; its findings are named in the message.
        """
        listed = "; ".join(
            f"{f.keyword} at {f.pointer or '/'}: {f.reason}" for f in report.findings
        )
        super().__init__(
            f"strict pre-flight: the {report.decoder} decoder would not enforce {len(report.findings)} "
            f"part(s) of the schema ({listed}); drop those keywords, or pass strict=False to rely on "
            "the second validation with pydantic"
        )
        self.report = report


class UncompilableSchemaError(LocalModelError, UserError):
    """The decoder's converter turns the schema into a grammar its server cannot compile.

    llama-cpp-python's server crashes on such a grammar, so the schema is refused before any
    request; the message names the parser's complaint.
    """


class MalformedResponseError(LocalModelError):
    """The server answered with a success status but a body that is not its documented wire format.

    Attributes:
        url: The endpoint that answered.
        path: JSON pointer (RFC 6901) to the part of the body that was missing or wrong.
    """

    def __init__(self, message: str, *, url: str, path: str) -> None:
        """Create the error.

        Args:
            message: What was expected and what was found.
            url: The endpoint that answered.
            path: JSON pointer to the offending part of the body.
        """
        super().__init__(
            f"{message} (at {path or '/'} in the response from {url}); check that the server "
            "speaks the dialect this client was configured with"
        )
        self.url = url
        self.path = path
