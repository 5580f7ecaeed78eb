"""Benchmark: structured output on held-out models, twinflow against the openai SDK + pydantic.

Thirteen pydantic models written for this benchmark (not taken from the tests): flat, nested,
a bounded list of objects, enums, optionals, a discriminated union, string and number
constraints, dates, a dict, a recursive model, a tuple, a `\\d` pattern and a 17-field model.
Each gets five questions (five trials), asked of the embedded SmolLM2-135M on one
llama-cpp-python server started for the run, by:

- twinflow: `OpenAICompatibleChatModel` with its defaults (temperature 0 first, re-asks
  hotter with a new seed, `max_tokens` from the schema, 3 attempts) and llama-cpp-python's
  converter as pre-flight's grammar check, exactly as the CLI wires it;
- the peer: the openai SDK's `chat.completions.create` with the same `response_format` schema at
  temperature 0 (its other defaults: no `max_tokens`, one attempt), validated with pydantic.

A trial is valid when the answer validates as the model. A request that takes the server down
(the peer's raw `\\d` patterns do) or leaves it busy past a 30 s probe counts as a server crash,
and the server is started again before the next trial, so one client's crash never costs the
other a trial. Printed per model: valid trials, mean
attempts (twinflow) and mean seconds per trial, for both; then the totals, the rescue rate (of
twinflow's first-attempt failures, how many its re-asks fixed) and the load average.
Targets: twinflow at least 95% valid overall, no model below 4 of 5, and ahead of
the peer at equal temperature.

Usage: .venv/bin/python benchmarks/structured_heldout.py [--trials N] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import datetime
import enum
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import openai
from _bench import add_smoke  # this folder: sys.path[0]
from pydantic import BaseModel, Field, ValidationError

from twinflow.kernel import HttpTransport, SubprocessLauncher, TransportError
from twinflow.kernel._launcher import ServerProcess
from twinflow.kernel._netpolicy import free_port
from twinflow.models import OpenAICompatibleChatModel
from twinflow.models._embedded import embedded_model_file, server_command
from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.vocab import Message, StructuredOutputError

PEER_TIMEOUT = 60.0
TWINFLOW_TIMEOUT = 60.0


# --- the held-out models ----------------------------------------------------------------------


class Weather(BaseModel):
    """Flat."""

    city: str
    celsius: int
    raining: bool


class Postal(BaseModel):
    """Nested, inner part."""

    street: str
    town: str


class Shipment(BaseModel):
    """Nested."""

    recipient: str
    to: Postal


class Dish(BaseModel):
    """An item of a bounded list."""

    dish: str
    price: int


class Menu(BaseModel):
    """A list of objects with item bounds."""

    dishes: list[Dish] = Field(min_length=2, max_length=4)


class Mood(enum.Enum):
    """An enum."""

    HAPPY = "happy"
    SAD = "sad"
    ANGRY = "angry"


class Diary(BaseModel):
    """Enums and an optional."""

    mood: Mood
    note: str | None = None


class Card(BaseModel):
    """A payment branch."""

    method: Literal["card"]
    last4: str = Field(pattern=r"^\d{4}$")


class Cash(BaseModel):
    """The other branch."""

    method: Literal["cash"]
    amount: int


class Payment(BaseModel):
    """A discriminated union."""

    payment: Annotated[Card | Cash, Field(discriminator="method")]


class Username(BaseModel):
    """String constraints."""

    handle: str = Field(min_length=3, max_length=12, pattern=r"^[a-z][a-z0-9_]*$")


class Reading(BaseModel):
    """Number constraints."""

    sensor: str
    percent: float = Field(ge=0, le=100)


class Meeting(BaseModel):
    """Dates."""

    title: str
    day: datetime.date


class Inventory(BaseModel):
    """A dict."""

    counts: dict[str, int]


class Folder(BaseModel):
    """A recursive model."""

    name: str
    subfolders: list[Folder] = []


class Point(BaseModel):
    """A tuple."""

    label: str
    xy: tuple[int, int]


class Ticket(BaseModel):
    """A `\\d` pattern."""

    seat: str = Field(pattern=r"^\d{2}[A-F]$")


class Profile(BaseModel):
    """Seventeen fields."""

    first: str
    last: str
    age: int
    city: str
    country: str
    email: str
    phone: str
    job: str
    company: str
    years: int
    married: bool
    kids: int
    pet: str
    car: str
    hobby: str
    food: str
    color: str


@dataclass(frozen=True)
class Task:
    """A model and its five questions."""

    model: type[BaseModel]
    questions: tuple[str, ...]


TASKS = (
    Task(
        Weather,
        tuple(
            f"In {c} it is {t} degrees and {r}. Give the weather."
            for c, t, r in [
                ("Oslo", 3, "raining"),
                ("Lima", 19, "dry"),
                ("Cairo", 31, "dry"),
                ("Leeds", 11, "raining"),
                ("Quito", 15, "raining"),
            ]
        ),
    ),
    Task(
        Shipment,
        tuple(
            f"Send the parcel to {n} at {s}, {t}. Give the shipment."
            for n, s, t in [
                ("Ana", "1 Main St", "Porto"),
                ("Ben", "9 High Rd", "York"),
                ("Chen", "4 Elm Ave", "Perth"),
                ("Dee", "7 Oak Ln", "Cork"),
                ("Eli", "2 Bay St", "Nice"),
            ]
        ),
    ),
    Task(
        Menu,
        tuple(
            f"Tonight's menu: {a} for {p} and {b} for {q}. Give the menu."
            for a, p, b, q in [
                ("soup", 5, "steak", 20),
                ("salad", 7, "fish", 18),
                ("pasta", 9, "cake", 4),
                ("rice", 3, "curry", 11),
                ("bread", 2, "stew", 12),
            ]
        ),
    ),
    Task(
        Diary,
        tuple(
            f"Today I feel {m}. {n} Give the diary entry."
            for m, n in [
                ("happy", "The sun is out."),
                ("sad", "It rained."),
                ("angry", "The bus was late."),
                ("happy", "I got a gift."),
                ("sad", "I lost my keys."),
            ]
        ),
    ),
    Task(
        Payment,
        (
            "I paid by card ending 4821. Give the payment.",
            "I paid 40 in cash. Give the payment.",
            "Card payment, last four digits 0093. Give the payment.",
            "Cash payment of 15. Give the payment.",
            "Paid with my card, number ends in 7710. Give the payment.",
        ),
    ),
    Task(
        Username,
        tuple(
            f"My username is {h}. Give the username."
            for h in ["ada_l", "bob99", "carol", "dan_the_man", "eve7"]
        ),
    ),
    Task(
        Reading,
        tuple(
            f"Sensor {s} reads {p} percent. Give the reading."
            for s, p in [("A1", 42.5), ("B7", 99), ("C3", 0.5), ("D2", 73), ("E9", 12.25)]
        ),
    ),
    Task(
        Meeting,
        tuple(
            f"The {t} is on {d}. Give the meeting."
            for t, d in [
                ("review", "2026-03-14"),
                ("launch", "2026-07-01"),
                ("retro", "2025-12-05"),
                ("standup", "2026-01-20"),
                ("offsite", "2026-09-30"),
            ]
        ),
    ),
    Task(
        Inventory,
        tuple(
            f"We have {a} apples and {b} pears. Give the inventory counts."
            for a, b in [(3, 5), (10, 2), (0, 7), (12, 12), (6, 1)]
        ),
    ),
    Task(
        Folder,
        tuple(
            f"Folder '{r}' contains folders '{a}' and '{b}'. Give the folder tree."
            for r, a, b in [
                ("home", "docs", "music"),
                ("src", "lib", "tests"),
                ("work", "2025", "2026"),
                ("photos", "cats", "dogs"),
                ("root", "etc", "usr"),
            ]
        ),
    ),
    Task(
        Point,
        tuple(
            f"Point {n} is at x={x}, y={y}. Give the point."
            for n, x, y in [("A", 1, 2), ("B", -3, 4), ("C", 10, 0), ("D", 7, 7), ("E", 0, -5)]
        ),
    ),
    Task(
        Ticket,
        tuple(f"My seat is {s}. Give the ticket." for s in ["12C", "03A", "27F", "45B", "08D"]),
    ),
    Task(
        Profile,
        tuple(
            f"{f} {last} is {age}, lives in {city}, {country}; email {f.lower()}@mail.com, phone 555-01{i}; "
            f"works as a {job} at {co} for {y} years; married: {m}; {k} kids; pet {pet}; drives a {car}; "
            f"likes {hob}, {food} and the colour {col}. Give the profile."
            for i, (
                f,
                last,
                age,
                city,
                country,
                job,
                co,
                y,
                m,
                k,
                pet,
                car,
                hob,
                food,
                col,
            ) in enumerate(
                [
                    (
                        "Ana",
                        "Silva",
                        34,
                        "Porto",
                        "Portugal",
                        "nurse",
                        "Saude",
                        8,
                        "yes",
                        2,
                        "cat",
                        "Fiat",
                        "surf",
                        "fish",
                        "blue",
                    ),
                    (
                        "Ben",
                        "Okoro",
                        41,
                        "Lagos",
                        "Nigeria",
                        "pilot",
                        "Sky",
                        15,
                        "no",
                        0,
                        "dog",
                        "Kia",
                        "chess",
                        "rice",
                        "green",
                    ),
                    (
                        "Cai",
                        "Wong",
                        29,
                        "Perth",
                        "Australia",
                        "coder",
                        "Bits",
                        4,
                        "yes",
                        1,
                        "fish",
                        "Ford",
                        "golf",
                        "pie",
                        "red",
                    ),
                    (
                        "Dia",
                        "Rossi",
                        52,
                        "Turin",
                        "Italy",
                        "chef",
                        "Cibo",
                        30,
                        "yes",
                        3,
                        "bird",
                        "Alfa",
                        "opera",
                        "pasta",
                        "gold",
                    ),
                    (
                        "Eko",
                        "Sato",
                        23,
                        "Kyoto",
                        "Japan",
                        "clerk",
                        "Ryu",
                        1,
                        "no",
                        0,
                        "none",
                        "Honda",
                        "judo",
                        "ramen",
                        "black",
                    ),
                ]
            )
        ),
    ),
)


# --- the two clients --------------------------------------------------------------------------


@dataclass
class Tally:
    """One client's results on one model."""

    valid: int = 0
    attempts: int = 0
    seconds: float = 0.0
    trials: int = 0
    first_failed: int = 0
    rescued: int = 0


VERBOSE = os.environ.get("HELDOUT_VERBOSE") == "1"


def twinflow_trial(
    adapter: OpenAICompatibleChatModel, task: Task, question: str
) -> tuple[bool, int]:
    try:
        result = adapter.generate((Message.user(question),), task.model)
    except StructuredOutputError as exc:
        if VERBOSE:
            for attempt in exc.attempts:
                print(
                    f"   {task.model.__name__} #{attempt.number}: {attempt.emission[:160]!r} {attempt.error}"
                )
        return False, len(exc.attempts)
    except TransportError as exc:
        if VERBOSE:
            print(f"   {task.model.__name__}: {exc}")
        return False, 1
    return True, len(result.attempts)


def peer_trial(client: openai.OpenAI, task: Task, question: str) -> tuple[bool, int]:
    try:
        completion = client.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": question}],
            temperature=0,
            # llama-cpp-python's own response_format (a schema inside json_object).
            extra_body={
                "response_format": {"type": "json_object", "schema": task.model.model_json_schema()}
            },
        )
    except openai.APIError:
        return False, 1
    content = completion.choices[0].message.content or ""
    try:
        task.model.model_validate_json(content)
    except ValidationError:
        return False, 1
    return True, 1


class Server:
    """The embedded server, started again whenever a request took it down (counted per client)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = Path(tempfile.mkdtemp(prefix="heldout-")) / "server.log"
        self.process: ServerProcess | None = None
        self.restarts = 0
        self.probe = openai.OpenAI(
            base_url=f"{self.base}/v1", api_key="none", timeout=30.0, max_retries=0
        )

    def ensure(self) -> None:
        """Start the server if it is not answering."""
        if not self.crashed():
            return
        if self.process is not None:
            self.process.stop()
            self.restarts += 1
        self.process = SubprocessLauncher().launch(
            server_command(embedded_model_file(), self.port),
            health_url=f"{self.base}/v1/models",
            deadline=120.0,
            log_path=self.log,
        )

    def crashed(self) -> bool:
        """The server is down (a request took it down)."""
        if self.process is None or not self.process.running():
            return True
        try:
            self.probe.models.list()
        except openai.APIError:
            return True
        return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None, help="model names to run")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.trials, args.only = 1, ["Weather"]
    tasks = [t for t in TASKS if not args.only or t.model.__name__ in args.only]
    check = llama_cpp_grammar_check()
    server = Server()
    server.ensure()
    base = server.base
    crashes = {"twinflow": 0, "peer": 0}
    try:
        transport = HttpTransport()
        adapter = OpenAICompatibleChatModel(
            transport,
            base_url=base,
            dialect="llama-cpp-python",
            timeout=TWINFLOW_TIMEOUT,
            grammar_check=check,
        )
        client = openai.OpenAI(
            base_url=f"{base}/v1", api_key="none", timeout=PEER_TIMEOUT, max_retries=0
        )
        rows: list[tuple[str, Tally, Tally]] = []
        print(
            f"{'model':<10} {'twinflow valid':>14} {'attempts':>8} {'s/trial':>8} | "
            f"{'peer valid':>10} {'s/trial':>8}"
        )
        for task in tasks:
            ours, peer = Tally(), Tally()
            for question in task.questions[: args.trials]:
                server.ensure()
                start = time.perf_counter()
                ok, attempts = twinflow_trial(adapter, task, question)
                ours.seconds += time.perf_counter() - start
                crashes["twinflow"] += server.crashed()
                ours.valid += ok
                ours.attempts += attempts
                ours.first_failed += attempts > 1 or not ok
                ours.rescued += attempts > 1 and ok
                ours.trials += 1
                server.ensure()
                start = time.perf_counter()
                ok, attempts = peer_trial(client, task, question)
                peer.seconds += time.perf_counter() - start
                crashes["peer"] += server.crashed()
                peer.valid += ok
                peer.attempts += attempts
                peer.trials += 1
            rows.append((task.model.__name__, ours, peer))
            print(
                f"{task.model.__name__:<10} {ours.valid:>10}/{ours.trials:<3} "
                f"{ours.attempts / ours.trials:>8.2f} {ours.seconds / ours.trials:>8.2f} | "
                f"{peer.valid:>6}/{peer.trials:<3} {peer.seconds / peer.trials:>8.2f}",
                flush=True,
            )
        transport.close()
    finally:
        server.stop()
    total = sum(o.trials for _, o, _ in rows)
    ours_valid = sum(o.valid for _, o, _ in rows)
    peer_valid = sum(p.valid for _, _, p in rows)
    worst = min((o.valid for _, o, _ in rows), default=0)
    print(
        f"total: twinflow {ours_valid}/{total} ({100 * ours_valid / total:.0f}%), worst model "
        f"{worst}/{args.trials}, {sum(o.seconds for _, o, _ in rows):.0f} s, server crashes "
        f"{crashes['twinflow']}; peer (openai SDK + pydantic, temperature 0) {peer_valid}/{total} "
        f"({100 * peer_valid / total:.0f}%), {sum(p.seconds for _, _, p in rows):.0f} s, server "
        f"crashes {crashes['peer']} (the server is restarted after each)"
    )
    failed = sum(o.first_failed for _, o, _ in rows)
    rescued = sum(o.rescued for _, o, _ in rows)
    print(
        f"rescue: twinflow's re-asks fixed {rescued} of {failed} first-attempt failures"
        + (f" ({100 * rescued / failed:.0f}%)" if failed else "")
        + "; the peer does not re-ask"
    )
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")
    print(
        "targets: twinflow >= 95% valid: "
        f"{'met' if ours_valid >= 0.95 * total else 'MISSED'}; no model below 4/5: "
        f"{'met' if worst >= min(4, args.trials) else 'MISSED'}; ahead of the peer: "
        f"{'met' if ours_valid > peer_valid else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
