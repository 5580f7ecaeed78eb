"""Benchmark: structured output on real schema shapes, twinflow against three peers, scored.

Fourteen pydantic models written for this benchmark, each with one question and the answer it
has (so an answer is scored, not only validated): a discriminated union whose branch has a
pattern, enums, email / URL / date formats (``format: email``, `HttpUrl`, `datetime.date`), a bounded
list, nested arrays, a map, a tuple, float bounds, length limits, a recursive model, a 22-field
model and a model of mostly-absent optionals. Every system asks the embedded SmolLM2-135M on
one llama-cpp-python server started for the run, the same question, at temperature 0 once and
at temperature 0.7 `--trials` times with seeds 1..N:

- twinflow: `OpenAICompatibleChatModel.generate` with its defaults (the schema told to the
  model as an outline in the system message and enforced by the grammar, 3 attempts, re-asks
  that name the field, constraint and value, a new seed each), as the CLI wires it;
- openai: the openai SDK's `chat.completions.create` with the schema as llama-cpp-python's
  `response_format`, validated with pydantic, one attempt;
- instructor: `instructor.from_openai(..., mode=JSON)` with the schema as the same
  `response_format` (the server refuses the ``json_schema`` form its JSON_SCHEMA mode sends),
  and "instructor tools", its default tool mode, unconstrained; `max_retries=2` (3 attempts,
  its own re-ask) in both;
- pydantic-ai: `Agent(output_type=PromptedOutput(Model))` on its OpenAI chat model with the
  schema as llama-cpp-python's `response_format` (the server refuses the ``json_schema`` form
  `NativeOutput` sends), and "pydantic-ai tools", its default tool output, unconstrained; its
  default output retries.

Per system and temperature: valid (validates), exact (equals the answer), field accuracy (the
share of the answer's leaves the reply has equal), and the rescue rate (of first-attempt
failures, how many a later attempt fixed), for twinflow and instructor, the two that count their
attempts, printed again after the table as one line per system, both temperatures together. A request that takes the server down counts as invalid; the server is started again.
The peers are not in the lock: run it as

    uv run --frozen --with 'instructor==1.17.*' python benchmarks/structured_shapes.py

Targets: twinflow valid >= 95% at temperature 0.7, and its exact and field accuracy at least
every peer's at each temperature (each measure against the best peer at it). `--systems` runs
some systems only, `--only` some shapes.
"""

from __future__ import annotations

import argparse
import datetime
import enum
import importlib.util
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import openai
from _bench import add_smoke  # this folder: sys.path[0]
from pydantic import AfterValidator, BaseModel, Field, HttpUrl, ValidationError, WithJsonSchema
from structured_heldout import Server  # this folder: the embedded server, restarted on a crash

from twinflow.kernel import HttpTransport, TransportError
from twinflow.models import OpenAICompatibleChatModel
from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.vocab import Message, ModelSettings, StructuredOutputError

TIMEOUT = 90.0

# --- the shapes ---------------------------------------------------------------------------------


class Card(BaseModel):
    kind: Literal["card"]
    last4: str = Field(pattern=r"^\d{4}$")


class Transfer(BaseModel):
    kind: Literal["transfer"]
    iban: str = Field(pattern=r"^[A-Z]{2}\d{2}[A-Z0-9]{4,20}$")


class Payment(BaseModel):
    """A discriminated union whose branches carry patterns."""

    method: Annotated[Card | Transfer, Field(discriminator="kind")]
    euros: int


class Size(enum.Enum):
    SMALL = "small"
    MEDIUM = "medium"
    LARGE = "large"


class Order(BaseModel):
    """Enums."""

    drink: Literal["tea", "coffee", "juice"]
    size: Size


def _email(value: str) -> str:
    """The address, if it has the shape of one (pydantic's `EmailStr` needs a package the lock
    does not hold; the schema says ``format: email`` all the same)."""
    if re.fullmatch(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}", value) is None:
        raise ValueError("not an email address")
    return value


Email = Annotated[
    str, AfterValidator(_email), WithJsonSchema({"type": "string", "format": "email"})
]


class Contact(BaseModel):
    """Email, URL and date formats."""

    email: Email
    site: HttpUrl
    born: datetime.date


class Team(BaseModel):
    """A bounded list of strings."""

    members: list[str] = Field(min_length=2, max_length=3)


class Grid(BaseModel):
    """Nested arrays."""

    rows: list[list[int]]


class Stock(BaseModel):
    """A map."""

    counts: dict[str, int]


class Point(BaseModel):
    """A tuple."""

    xy: tuple[int, int]


class Reading(BaseModel):
    """Float bounds."""

    celsius: float = Field(ge=-50.0, le=60.0)
    humidity: float = Field(ge=0.0, le=1.0)


class Tweet(BaseModel):
    """Length limits."""

    handle: str = Field(min_length=2, max_length=15)
    text: str = Field(max_length=40)


class Node(BaseModel):
    """A recursive model."""

    name: str
    children: list[Node] = Field(default_factory=list)


class Form(BaseModel):
    """Twenty-two fields."""

    f01_first_name: str
    f02_last_name: str
    f03_age: int
    f04_city: str
    f05_country: str
    f06_zip: str
    f07_street: str
    f08_number: int
    f09_phone: str
    f10_married: bool
    f11_children: int
    f12_pet: str
    f13_car: str
    f14_colour: str
    f15_food: str
    f16_sport: str
    f17_job: str
    f18_employer: str
    f19_salary: int
    f20_language: str
    f21_hobby: str
    f22_student: bool


class Profile(BaseModel):
    """Mostly-absent optionals."""

    name: str
    nickname: str | None = None
    twitter: str | None = None
    phone: str | None = None
    fax: str | None = None
    age: int | None = None


@dataclass(frozen=True)
class Task:
    model: type[BaseModel]
    question: str
    answer: dict[str, Any]


TASKS = (
    Task(
        Payment,
        "I paid 40 euros by card; the card number ends in 1234.",
        {"method": {"kind": "card", "last4": "1234"}, "euros": 40},
    ),
    Task(Order, "A large coffee, please.", {"drink": "coffee", "size": "large"}),
    Task(
        Contact,
        "Ann's email is ann@example.com, her site is https://ann.example.org/ and she was "
        "born on 1990-05-17.",
        {"email": "ann@example.com", "site": "https://ann.example.org/", "born": "1990-05-17"},
    ),
    Task(Team, "The team is Ada and Bob.", {"members": ["Ada", "Bob"]}),
    Task(Grid, "The grid has rows 1 2 and 3 4.", {"rows": [[1, 2], [3, 4]]}),
    Task(Stock, "We hold 3 apples and 5 pears.", {"counts": {"apples": 3, "pears": 5}}),
    Task(Point, "The point is at x=2, y=7.", {"xy": [2, 7]}),
    Task(
        Reading,
        "It is 21.5 degrees Celsius with humidity 0.4.",
        {"celsius": 21.5, "humidity": 0.4},
    ),
    Task(
        Tweet,
        "User @sam wrote: hello world",
        {"handle": "sam", "text": "hello world"},
    ),
    Task(
        Node,
        "The tree: root has two children, a and b.",
        {
            "name": "root",
            "children": [{"name": "a", "children": []}, {"name": "b", "children": []}],
        },
    ),
    Task(
        Form,
        "Jo Lee, 30, lives at 5 Main Street, 10115 Berlin, Germany, phone 555-0100, married, "
        "2 children, a dog, a Fiat, likes blue, pizza and tennis, works as a nurse at Charite "
        "for 50000 a year, speaks German, hobby chess, not a student.",
        {
            "f01_first_name": "Jo",
            "f02_last_name": "Lee",
            "f03_age": 30,
            "f04_city": "Berlin",
            "f05_country": "Germany",
            "f06_zip": "10115",
            "f07_street": "Main Street",
            "f08_number": 5,
            "f09_phone": "555-0100",
            "f10_married": True,
            "f11_children": 2,
            "f12_pet": "dog",
            "f13_car": "Fiat",
            "f14_colour": "blue",
            "f15_food": "pizza",
            "f16_sport": "tennis",
            "f17_job": "nurse",
            "f18_employer": "Charite",
            "f19_salary": 50000,
            "f20_language": "German",
            "f21_hobby": "chess",
            "f22_student": False,
        },
    ),
    Task(
        Profile,
        "Her name is Mia and she is 28.",
        {
            "name": "Mia",
            "nickname": None,
            "twitter": None,
            "phone": None,
            "fax": None,
            "age": 28,
        },
    ),
    Task(
        Payment,
        "I sent 120 euros by bank transfer to IBAN DE44500105175407324931.",
        {"method": {"kind": "transfer", "iban": "DE44500105175407324931"}, "euros": 120},
    ),
    Task(Order, "Small tea.", {"drink": "tea", "size": "small"}),
)


# --- scoring ------------------------------------------------------------------------------------


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """The scalar leaves of a JSON value by pointer (an empty list or map is a leaf)."""
    if isinstance(value, dict) and value:
        return {
            k: v for key, item in value.items() for k, v in leaves(item, f"{path}/{key}").items()
        }
    if isinstance(value, list) and value:
        return {
            k: v for n, item in enumerate(value) for k, v in leaves(item, f"{path}/{n}").items()
        }
    return {path: value}


def equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and abs(a - b) < 1e-6
    return bool(a == b)


def score(task: Task, output: BaseModel | None) -> tuple[bool, float]:
    """(exact, field accuracy) of a validated output against the task's answer."""
    if output is None:
        return False, 0.0
    got = leaves(output.model_dump(mode="json"))
    want = leaves(task.answer)
    right = sum(equal(value, got.get(path, object())) for path, value in want.items())
    return right == len(want) and len(got) == len(want), right / len(want)


@dataclass
class Tally:
    trials: int = 0
    valid: int = 0
    exact: int = 0
    accuracy: float = 0.0
    first_failed: int = 0
    rescued: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Outcome:
    output: BaseModel | None
    attempts: int | None = None  # None: the system does not say how many it made


# --- the systems --------------------------------------------------------------------------------


@dataclass
class Systems:
    base: str
    transport: HttpTransport = field(default_factory=HttpTransport)

    def __post_init__(self) -> None:
        self.twinflow_model = OpenAICompatibleChatModel(
            self.transport,
            base_url=self.base,
            dialect="llama-cpp-python",
            timeout=TIMEOUT,
            grammar_check=llama_cpp_grammar_check(),
        )
        self.openai = openai.OpenAI(
            base_url=f"{self.base}/v1", api_key="none", timeout=TIMEOUT, max_retries=0
        )

    def twinflow(self, task: Task, temperature: float, seed: int) -> Outcome:
        settings = ModelSettings(temperature=temperature, seed=seed)
        try:
            result = self.twinflow_model.generate(
                (Message.user(task.question),), task.model, settings=settings
            )
        except StructuredOutputError as exc:
            return Outcome(None, len(exc.attempts))
        except TransportError:
            return Outcome(None, 1)
        return Outcome(result.output, len(result.attempts))

    def openai_sdk(self, task: Task, temperature: float, seed: int) -> Outcome:
        try:
            completion = self.openai.chat.completions.create(
                model="local",
                messages=[{"role": "user", "content": task.question}],
                temperature=temperature,
                seed=seed,
                extra_body={
                    "response_format": {
                        "type": "json_object",
                        "schema": task.model.model_json_schema(),
                    }
                },
            )
            return Outcome(
                task.model.model_validate_json(completion.choices[0].message.content or ""), 1
            )
        except (openai.APIError, ValidationError):
            return Outcome(None, 1)

    def instructor(self, task: Task, temperature: float, seed: int) -> Outcome:
        """JSON mode, the schema sent as this server's ``response_format`` (it refuses the
        ``json_schema`` form instructor's JSON_SCHEMA mode sends)."""
        import instructor

        schema = {"type": "json_object", "schema": task.model.model_json_schema()}
        extra = {"response_format": schema}
        return self._instructor(instructor.Mode.JSON, task, temperature, seed, extra)

    def instructor_tools(self, task: Task, temperature: float, seed: int) -> Outcome:
        """instructor's default: the output as a tool call, nothing constrained."""
        import instructor

        return self._instructor(instructor.Mode.TOOLS, task, temperature, seed, None)

    def _instructor(
        self, mode: Any, task: Task, temperature: float, seed: int, extra: dict[str, Any] | None
    ) -> Outcome:
        import instructor

        client = instructor.from_openai(self.openai, mode=mode)
        errors: list[object] = []
        client.on("parse:error", errors.append)
        try:
            output = client.chat.completions.create(
                model="local",
                response_model=task.model,
                messages=[{"role": "user", "content": task.question}],
                temperature=temperature,
                seed=seed,
                max_retries=2,
                extra_body=extra,
            )
        except Exception:  # instructor wraps the last failure in its own retry error
            return Outcome(None, len(errors) or 1)
        return Outcome(output, len(errors) + 1)

    def pydantic_ai(self, task: Task, temperature: float, seed: int) -> Outcome:
        """Prompted output, with the schema sent as this server's ``response_format`` (it
        refuses the ``json_schema`` form `NativeOutput` sends)."""
        from pydantic_ai import PromptedOutput

        schema = {"type": "json_object", "schema": task.model.model_json_schema()}
        extra = {"extra_body": {"response_format": schema}}
        return self._pydantic_ai(PromptedOutput(task.model), task, temperature, seed, extra)

    def pydantic_ai_tools(self, task: Task, temperature: float, seed: int) -> Outcome:
        """pydantic-ai's default: the output as a tool call, nothing constrained."""
        return self._pydantic_ai(task.model, task, temperature, seed, {})

    def _pydantic_ai(
        self, output: Any, task: Task, temperature: float, seed: int, extra: dict[str, Any]
    ) -> Outcome:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(base_url=f"{self.base}/v1", api_key="none")
        agent = Agent(OpenAIChatModel("local", provider=provider), output_type=output)
        settings: Any = {"temperature": temperature, "seed": seed, "timeout": TIMEOUT, **extra}
        try:
            result = agent.run_sync(task.question, model_settings=settings)
        except Exception:  # any failure of the peer is an invalid trial
            return Outcome(None)
        return Outcome(result.output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="trials at temperature 0.7")
    parser.add_argument("--only", nargs="*", default=None, help="model names to run")
    parser.add_argument("--systems", nargs="*", default=None, help="systems to run (all)")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.trials, args.only = 1, ["Order"]
    tasks = [t for t in TASKS if not args.only or t.model.__name__ in args.only]
    tasks = tasks[:1] if args.smoke else tasks
    server = Server()
    server.ensure()
    systems = Systems(server.base)
    runners: dict[str, Callable[[Task, float, int], Outcome]] = {
        "twinflow": systems.twinflow,
        "openai": systems.openai_sdk,
        "instructor": systems.instructor,
        "instructor tools": systems.instructor_tools,
        "pydantic-ai": systems.pydantic_ai,
        "pydantic-ai tools": systems.pydantic_ai_tools,
    }
    if importlib.util.find_spec("instructor") is None:
        del runners["instructor"], runners["instructor tools"]
        print("instructor is not installed (it is not in the lock): its column is left out; run")
        print(
            "  uv run --frozen --with 'instructor==1.17.*' python benchmarks/structured_shapes.py"
        )
    if args.systems:
        runners = {name: run for name, run in runners.items() if name in args.systems}
    plan = [(0.0, 0)] + [(0.7, seed) for seed in range(1, args.trials + 1)]
    tallies = {(name, t): Tally() for name in runners for t in (0.0, 0.7)}
    crashes = dict.fromkeys(runners, 0)
    try:
        for task in tasks:
            for temperature, seed in plan:
                for name, run in runners.items():
                    server.ensure()
                    start = time.perf_counter()
                    outcome = run(task, temperature, seed)
                    tally = tallies[(name, temperature)]
                    tally.seconds += time.perf_counter() - start
                    crashes[name] += server.crashed()
                    exact, accuracy = score(task, outcome.output)
                    tally.trials += 1
                    tally.valid += outcome.output is not None
                    tally.exact += exact
                    tally.accuracy += accuracy
                    if outcome.attempts is not None and (
                        outcome.attempts > 1 or outcome.output is None
                    ):
                        tally.first_failed += 1
                        tally.rescued += outcome.output is not None
            print(f"{task.model.__name__}: done", flush=True)
    finally:
        systems.transport.close()
        server.stop()
    print(
        f"\n{'system':<18} {'T':>4} {'valid':>9} {'exact':>9} {'field acc':>9} {'rescued':>9} {'s/trial':>8}"
    )
    for (name, temperature), t in tallies.items():
        if not t.trials:
            continue
        rescue = (
            f"{t.rescued}/{t.first_failed}" if name.startswith(("twinflow", "instructor")) else "-"
        )
        print(
            f"{name:<18} {temperature:>4.1f} {t.valid:>5}/{t.trials:<3} {t.exact:>5}/{t.trials:<3} "
            f"{t.accuracy / t.trials:>9.2f} {rescue:>9} {t.seconds / t.trials:>8.2f}"
        )
    print(f"server crashes (restarted after each): {crashes}")
    counted = [n for n in runners if n.startswith(("twinflow", "instructor"))]
    rescues = ", ".join(
        f"{n} {sum(tallies[(n, t)].rescued for t in (0.0, 0.7))}"
        f"/{sum(tallies[(n, t)].first_failed for t in (0.0, 0.7))}"
        for n in counted
    )
    print(f"rescue (first-attempt failures a re-ask fixed, same server): {rescues}")
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")
    verdicts = []
    if "twinflow" in runners:
        hot = tallies[("twinflow", 0.7)]
        valid_met = hot.valid >= 0.95 * hot.trials
        verdicts.append(f"twinflow valid >= 95% at T 0.7: {'met' if valid_met else 'MISSED'}")
    peers = [n for n in runners if n != "twinflow"]
    for temperature in (0.0, 0.7) if peers and "twinflow" in runners else ():
        ours = tallies[("twinflow", temperature)]
        # Each measure against the best peer at it, not one peer's pair.
        exact = max(tallies[(n, temperature)].exact for n in peers)
        accuracy = max(tallies[(n, temperature)].accuracy for n in peers)
        met = ours.exact >= exact and ours.accuracy >= accuracy - 1e-9
        verdicts.append(
            f"correctness at least every peer's at T {temperature}: {'met' if met else 'MISSED'}"
            f" (exact {ours.exact} vs best peer {exact})"
        )
    print("targets: " + "; ".join(verdicts))


if __name__ == "__main__":
    main()
