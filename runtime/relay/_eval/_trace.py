"""The spans of ``relay eval --otel`` (docs/observability.md, docs/eval.md).

An evaluation is one ``relay.eval`` span; each run of a case under a configuration is a
``relay.eval.case`` span within it, which says the case, the configuration, the repeat, the
outcome and the figures of the run (:func:`run_attributes`). A run's span is the current span
while its session opens, so the session's own spans (``relay.session``, its turns, its model
requests) are children of it.

``opentelemetry`` is imported only when an evaluation is traced; what a run's span says is a
plain function of its record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._otel import SCOPE
from .._otel import _names as n
from .._otel._values import error_text
from .._version import __version__
from ._score import RunRecord

if TYPE_CHECKING:
    from opentelemetry.trace import Span

#: The ``relay.eval.outcome`` of a run.
COMPLETED = "completed"
FAILED = "failed"
#: The ``error.type`` of a failed run (its failure is the status's message when content is
#: recorded).
RUN_FAILED = "run_failed"


def run_attributes(record: RunRecord) -> dict[str, Any]:
    """What a run's span says once the run is over: its outcome and its figures."""
    attributes: dict[str, Any] = {
        n.RELAY_EVAL_OUTCOME: FAILED if record.failure is not None else COMPLETED,
        n.RELAY_EVAL_FACTS_CHECKED: record.facts_checked,
        n.RELAY_EVAL_FACTS_KEPT: record.facts_kept,
        n.RELAY_EVAL_QUESTIONS: record.questions,
        n.RELAY_EVAL_ANSWERED: record.answered,
        n.RELAY_EVAL_COMPACTIONS: record.compactions,
        n.RELAY_EVAL_INPUT_TOKENS: record.input_tokens,
        n.RELAY_EVAL_REREADS: record.rereads,
    }
    if record.facts_checked:
        attributes[n.RELAY_EVAL_RETENTION] = record.facts_kept / record.facts_checked
    return attributes


class EvalTracer:
    """The spans of one evaluation, sent to ``tracer_provider`` (the sessions' spans too)."""

    def __init__(self, tracer_provider: Any, *, content: bool = False) -> None:
        from opentelemetry import trace

        self.tracer_provider = tracer_provider
        """The provider the evaluation's spans and its sessions' go to."""
        self.content = content
        """Whether a failed run's span says its failure (it may quote the session's
        content); else its kind alone."""
        self._trace = trace
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        self._evaluation: Span | None = None
        self._runs = 0
        self._failed = 0

    @contextmanager
    def evaluation(self, cases: int, configurations: Sequence[str], repeats: int) -> Iterator[None]:
        """The evaluation's span, open for the block; its parent is the caller's current
        span (none: the trace starts with it)."""
        span = self._tracer.start_span(
            n.EVAL_SPAN,
            attributes={
                n.RELAY_EVAL_CASES: cases,
                n.RELAY_EVAL_CONFIGURATIONS: list(configurations),
                n.RELAY_EVAL_REPEATS: repeats,
                n.RELAY_VERSION: __version__,
            },
        )
        self._evaluation, self._runs, self._failed = span, 0, 0
        try:
            yield
        finally:
            span.set_attributes(
                {n.RELAY_EVAL_RUNS: self._runs, n.RELAY_EVAL_FAILED_RUNS: self._failed}
            )
            if self._failed:
                _fail(span, RUN_FAILED, f"{self._failed} of {self._runs} run(s) failed")
            self._evaluation = None
            span.end()

    @contextmanager
    def run(
        self, case: str, configuration: str, repeat: int
    ) -> Iterator[Callable[[RunRecord], None]]:
        """A run's span, current for the block (the session opened in it is its child); the
        block calls what it is given with the run's record."""
        trace = self._trace
        parent = trace.set_span_in_context(self._evaluation) if self._evaluation else None
        span = self._tracer.start_span(
            n.EVAL_RUN_SPAN,
            context=parent,
            attributes={
                n.RELAY_EVAL_CASE: case,
                n.RELAY_EVAL_CONFIGURATION: configuration,
                n.RELAY_EVAL_REPEAT: repeat,
            },
        )

        def finish(record: RunRecord) -> None:
            self._runs += 1
            span.set_attributes(run_attributes(record))
            if record.failure is not None:
                self._failed += 1
                said = error_text(RUN_FAILED, record.failure, content=self.content, redact=str)
                _fail(span, RUN_FAILED, said)

        with trace.use_span(span, end_on_exit=True):
            yield finish


def _fail(span: Span, kind: str, message: str) -> None:
    from .._otel._model import fail

    fail(span, kind, message)


__all__ = ["COMPLETED", "FAILED", "RUN_FAILED", "EvalTracer", "run_attributes"]
