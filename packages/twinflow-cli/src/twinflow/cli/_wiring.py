"""The command's wiring: the run spec's agent with the command's own additions.

The spec's agent is `twinflow.agent`'s (`RunSpec.resolve`, one pass); here the command adds
what only it has: llama-cpp-python's in-process grammar check for the model clients
(`chat_model`), the configuration check of commands that start no MCP server
(`check_agent`), and the eval's judge models and run identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from twinflow.agent import McpTools, ModelSpec, RunSpec, SpecError
from twinflow.eval import Dataset, Judge
from twinflow.eval._judge import JudgeWiring, verdict_type
from twinflow.eval._results import RunIdentity
from twinflow.kernel import Clock, HttpTransport, Ids, Transport
from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.vocab import ChatModel, ModelSettings, digest

__all__ = [
    "JudgeModels",
    "chat_model",
    "check_agent",
    "judge_model_spec",
    "judges_of",
    "run_identity",
]


def chat_model(spec: ModelSpec, transport: Transport, ids: Ids) -> ChatModel:
    """The spec's model client, with llama-cpp-python's own grammar check (ADR 0033)."""
    check = llama_cpp_grammar_check() if spec.dialect == "llama-cpp-python" else None
    return spec.chat_model(transport, ids, check)


def check_agent(
    spec: RunSpec,
    tools: Sequence[Callable[..., Any]],
    command: str,
    servers: Sequence[McpTools] | None = None,
) -> None:
    """Build ``spec``'s agent once without a model, so a mistake is refused before any file or
    server exists, and warn about tools the policy never allows.

    Raises:
        AgentConfigError: the policy names a tool that is not registered, two tools share a name.
        SpecError: the output model does not resolve, or the spec names MCP servers and
            ``command`` does not start them (``servers`` is None).
    """
    if servers is None and spec.mcp_servers:
        raise SpecError(
            f"twinflow {command} does not start MCP servers yet: this spec names "
            f"{', '.join(s.name for s in spec.mcp_servers)} (mcp_servers); use twinflow run"
        )
    spec.resolve(tools).check(servers or (), command)


def judges_of(dataset: Dataset) -> tuple[Judge, ...]:
    """The dataset's judge scorers, each once, in the order they first appear."""
    found: dict[str, Judge] = {}
    for case in dataset.cases:
        for scorer in dataset.scorers_for(case):
            if isinstance(scorer, Judge):
                found.setdefault(digest(scorer), scorer)
    return tuple(found.values())


def judge_model_spec(judge: Judge) -> ModelSpec:
    """A judge scorer's ``model`` section, read as a run spec's.

    Raises:
        SpecError: naming the judge and the key at fault.
    """
    try:
        return ModelSpec(**judge.model)
    except SpecError as exc:
        raise SpecError(f"judge {judge.name or judge.kind!r}: model: {exc}") from None


class JudgeModels:
    """Builds each judge scorer's chat model on demand, one transport per judge model.

    Args:
        urls: Maps a judge's ``model.url`` to the URL to call (``embedded`` to the running
            embedded server's).
        ids: The ids port of the clients (tool-call ids of structured-action mode).
    """

    def __init__(self, urls: Callable[[str], str], ids: Ids) -> None:
        self._urls = urls
        self._ids = ids
        self._transports: dict[str, HttpTransport] = {}

    def _spec(self, judge: Judge) -> tuple[str, ModelSpec]:
        spec = judge_model_spec(judge)
        spec = spec.model_copy(update={"url": self._urls(spec.url)})
        return digest(spec), spec

    def prepare(self, dataset: Dataset) -> None:
        """Open the transport of every judge of ``dataset`` now, before cases run in threads
        (`model` then only reads them)."""
        for judge in judges_of(dataset):
            key, spec = self._spec(judge)
            if key not in self._transports:
                self._transports[key] = spec.transport()

    def model(self, judge: Judge) -> ChatModel:
        """The judge's client, on the transport `prepare` opened (or one opened now)."""
        key, spec = self._spec(judge)
        if key not in self._transports:
            self._transports[key] = spec.transport()
        return chat_model(spec, self._transports[key], self._ids)

    @staticmethod
    def settings(judge: Judge) -> ModelSettings:
        """The judge's model settings (needed to replay its judgements, too)."""
        return judge_model_spec(judge).settings()

    def wiring(self, clock: Clock) -> JudgeWiring:
        """The eval's judging port on these models."""
        return JudgeWiring(model=self.model, settings=self.settings, clock=clock, ids=self._ids)

    @staticmethod
    def check(dataset: Dataset, *, verdicts: bool = True) -> None:
        """Refuse, before anything runs, a judge whose model section or verdict model is wrong.

        ``verdicts=False`` checks the model sections only: resolving a verdict model imports
        code, which a received run directory's scoring does only once trusted.

        Raises:
            SpecError: a judge's model section is not a valid model spec.
            EvalValueError (``reason="scorer"``): a verdict model does not resolve or has no boolean pass field.
        """
        for judge in judges_of(dataset):
            judge_model_spec(judge)
            if verdicts:
                verdict_type(judge)

    def close(self) -> None:
        """Close every transport opened."""
        for transport in self._transports.values():
            transport.close()


def run_identity(spec: RunSpec, users: Mapping[str, RunSpec] | None = None) -> RunIdentity:
    """What an eval run's ``run.json`` records of the spec: its digest and the model's identity
    (`ModelSpec.identity`), and of the simulated users' specs (by the dataset's names) one
    digest. The spec digest is computed here only: a refused resume quotes it and Lab Notes
    show it, both from ``run.json``."""
    users_digest = digest({name: digest(s) for name, s in users.items()}) if users else None
    return RunIdentity(
        spec_digest=digest(spec), model=spec.model.identity(), users_digest=users_digest
    )
