"""The cost of tracing a turn (docs/observability.md): tracing off, the API alone, the SDK.

Three ways a session can run, each in a fresh process of its own, one after the other in each
repetition, so that a busy moment of the machine hits all three alike:

- **off**: ``opentelemetry`` cannot be imported at all (as in an install without the ``otel``
  extra): the session has no tracer;
- **API alone**: ``opentelemetry-api`` installed, no SDK configured: every span is a no-op;
- **SDK**: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter``, passed as ``open_session(tracer_provider=...)``: every span is
  recorded and exported (three per turn: the turn, its model request, and the session's).

Each process opens one session on relay's scripted model (written-out replies, rollout off),
runs a few turns to warm up, then timed batches of turns (``submit`` → ``turn_complete``, one
model request each): CPU (``time.process_time``) and wall time per turn of each batch. The
ratios are against the off case of the same run.

``python -m bench.otel CHILD VARIANT TURNS BATCH`` is one such process (it prints its samples
as JSON).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from ._core import Figure, Options

GROUP = "tracing"
VARIANTS = (
    ("off", "tracing off (no OpenTelemetry)"),
    ("api", "OpenTelemetry API alone, no SDK (no-op spans)"),
    ("sdk", "SDK + in-memory exporter"),
)
WARM_TURNS = 20
ROOT = Path(__file__).resolve().parent.parent


def _child(variant: str, turns: int, batch: int) -> None:
    """One process: the session and its timed batches (printed as JSON)."""
    if variant == "off":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    import random
    import time

    import trio

    import relay
    from relay.testing import ScriptedModel, fixed_clock

    from ._drive import QUESTIONS, TurnDriver, config, turn_script

    provider = None
    exporter = None
    if variant == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def main() -> dict[str, list[float]]:
        model = ScriptedModel(turn_script(WARM_TURNS + turns), request_log=None)
        cpu: list[float] = []
        wall: list[float] = []
        async with relay.open_session(
            config(), model=model, clock=fixed_clock, rng=random.Random(0), tracer_provider=provider
        ) as session:
            driver = TurnDriver(session)
            for i in range(WARM_TURNS):
                await driver.turn(QUESTIONS[i % len(QUESTIONS)])
            for _ in range(turns // batch):
                cpu_start, wall_start = time.process_time(), time.perf_counter()
                for i in range(batch):
                    await driver.turn(QUESTIONS[i % len(QUESTIONS)])
                cpu.append((time.process_time() - cpu_start) / batch)
                wall.append((time.perf_counter() - wall_start) / batch)
        traced = "opentelemetry.trace" in sys.modules
        spans = len(exporter.get_finished_spans()) if exporter is not None else 0
        return {"cpu": cpu, "wall": wall, "traced": [float(traced)], "spans": [float(spans)]}

    print(json.dumps(trio.run(main)))


def _process(variant: str, turns: int, batch: int) -> dict[str, list[float]]:
    result = subprocess.run(
        [sys.executable, "-m", "bench.otel", "CHILD", variant, str(turns), str(batch)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"bench.otel {variant}: {result.stderr.strip()[-500:]}")
    samples: dict[str, list[float]] = json.loads(result.stdout)
    return samples


def run(opts: Options) -> list[Figure]:
    """Per-turn CPU and wall time with tracing off, the API alone and the SDK."""
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        opts.note("tracing: skipped (the OpenTelemetry SDK is not installed).")
        return []
    turns, batch = (60, 20) if opts.quick else (600, 50)
    per = turns // batch  # samples per process
    cpu: dict[str, list[float]] = {name: [] for name, _ in VARIANTS}
    wall: dict[str, list[float]] = {name: [] for name, _ in VARIANTS}
    spans: dict[str, float] = {}
    for _ in range(opts.repeat):
        for name, _ in VARIANTS:
            samples = _process(name, turns, batch)
            if samples["traced"] != [float(name != "off")]:
                raise RuntimeError(f"bench.otel {name}: OpenTelemetry was imported: {samples}")
            cpu[name] += [s * 1e6 for s in samples["cpu"]]
            wall[name] += [s * 1e6 for s in samples["wall"]]
            spans[name] = samples["spans"][0]
    figures: list[Figure] = []
    for name, label in VARIANTS[1:]:
        # Each repetition's processes ran back to back: their ratio cancels most of what
        # other work on the machine did to both.
        paired = [
            statistics.median(cpu[name][i : i + per]) / statistics.median(cpu["off"][i : i + per])
            for i in range(0, len(cpu["off"]), per)
        ]
        figures.append(
            Figure(GROUP, f"scripted turn, {label}: CPU ÷ tracing off, paired", "×", paired)
        )
    for measure, series in (("CPU", cpu), ("wall", wall)):
        off: float | None = None
        for name, label in VARIANTS:
            figure = Figure(
                GROUP,
                f"scripted turn, {label}: {measure} per turn",
                "µs",
                series[name],
                ref_name=None if off is None else "tracing off",
                ref_value=off,
            )
            if name == "off":
                off = figure.median
            figures.append(figure)
    per_turn = (spans["sdk"] - 1) / (WARM_TURNS + turns)  # the session's own span aside
    opts.note(f"tracing: the SDK recorded {per_turn:.2f} spans per turn (the turn, its request).")
    figures.append(_listener_cost(opts))
    return figures


def _listener_cost(opts: Options) -> Figure:
    """What tracing adds to a turn with no SDK, measured alone: the events of one scripted
    turn told to a session's tracer, and its model request made through the tracer's
    wrapper, against the same request without it (in this process, whose global tracer
    provider is the API's no-op one)."""
    import time
    from types import SimpleNamespace

    import trio

    import relay
    from relay import testing
    from relay._otel import session_tracer

    from ._drive import CannedModel, canned_text, config

    async def one_turn() -> list[relay.Event]:
        async with (
            relay.open_session(config()) as session,
            testing.recording(session) as recorder,
        ):
            await session.ask("hello")
        return recorder.events

    events = trio.run(one_turn)
    turn = events[1:-1]  # session_configured and shutdown_complete aside
    tracer = session_tracer(config())
    assert tracer is not None
    no_key = SimpleNamespace(values=(), redact=lambda text: text)
    wiring = SimpleNamespace(secrets=no_key, session_id="bench")
    shared = SimpleNamespace(wiring=wiring, recorder=None, listeners=[])
    tracer.attach(shared)  # type: ignore[arg-type]
    tracer.see(events[0])
    prompt = relay.lowlevel.Prompt(model="scripted", instructions="", input=())
    plain = CannedModel([canned_text(0, "hello there", 10)])
    wrapped = tracer.wrap(plain)
    count = opts.count(20_000, 2_000)

    async def requests(model: relay.lowlevel.ModelClient) -> float:
        start = time.perf_counter()
        for _ in range(count):
            async with model.stream(prompt) as stream:
                async for _event in stream:
                    pass
        return time.perf_counter() - start

    samples: list[float] = []
    for _ in range(opts.repeat):
        start = time.perf_counter()
        for _ in range(count):
            for event in turn:
                tracer.see(event)
        told = time.perf_counter() - start
        extra = trio.run(requests, wrapped) - trio.run(requests, plain)
        samples.append((told + max(0.0, extra)) / count * 1e6)
    return Figure(
        GROUP,
        f"API alone: the tracer's own work per turn ({len(turn)} events, a request), alone",
        "µs",
        samples,
    )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "CHILD":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("usage: python -m bench.otel CHILD off|api|sdk TURNS BATCH")
