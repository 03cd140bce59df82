"""Sweep progress on the terminal: a live rich display on a TTY, one plain line per event everywhere else.

On a terminal the bottom line is redrawn in place (configs done of N, ETA, the current config, its phase and
rep, its last result) and every finished config is printed above it, so nothing stale stays on screen at any
width. Not on a terminal (a log file, the systemd journal, CI), every event is one plain line with no control
characters, and progress inside a config is printed only when its phase changes. Colours follow rich's rules
(``NO_COLOR`` turns them off); statuses are coloured, not only the text around them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from edgeprof.safetext import safe_text

# Outcome words that deserve a colour: failures red, noisy results yellow (the words come from the sweep's
# outcome line, e.g. "ok", "crashed: ...", "ok (unstable)").
_RED = ("crashed", "error", "failed", "timeout", "load_failed", "oom", "skipped_memory", "interrupted")
_YELLOW = ("unstable", "throttled", "contended", "warning", "no decode")

# What a config whose cold run ended at its first token says at once, and at its end: nothing was decoded,
# so every rep after it would measure the same nothing
EOS_FIRST = (
    "the model emitted end-of-sequence as its first token: no decode to measure "
    "(set ignore_eos = true in the workload to measure decode anyway)"
)
EOS_FIRST_OUTCOME = "no decode: end-of-sequence at the first token"


def ended_at_first_token(event: dict[str, Any]) -> bool:
    """A cold measurement whose output ended at end-of-sequence after at most one token."""
    tokens = event.get("tokens_out")
    return (
        event.get("kind") == "cold"
        and event.get("finish_reason") == "eos"
        and isinstance(tokens, int)
        and tokens <= 1
    )


def outcome_style(outcome: str) -> str | None:
    low = outcome.lower()
    if any(word in low for word in _RED):
        return "red"
    if any(word in low for word in _YELLOW):
        return "yellow"
    if low.startswith("ok"):
        return "green"
    return None


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


PLAIN_SOAK_EVERY_S = 60.0  # off a terminal, one soak line per this much soak time


class Progress:
    """What the sweep reports while it runs. ``start`` → (``phase`` | ``event``)* → ``finish``, per config;
    ``line`` for anything else; ``close`` once at the end (also safe to call twice)."""

    def __init__(self, total: int, out: TextIO | None = None) -> None:
        self.total = total
        self.out = out or sys.stdout
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.durations: list[float] = []
        self.done = 0
        self._index = 0
        self._label = ""
        self._phase = ""
        self._last = ""
        self._live: Any = None
        self._task: Any = None
        self._console: Any = None
        # The hottest temperature now, where the telemetry has a sensor (set by the sweep); read once per
        # soak window, for the live line
        self.read_temp: Callable[[], float | None] | None = None
        self._soak: dict[str, Any] | None = None  # the running soak's soak_start event
        self._soak_plain_at_s = 0.0  # the soak time at which the next plain line is due
        self._eos_first = False  # the current config's cold run ended at its first token
        self._open = ""  # the comparisons of the current group of rivals still open (sequential decisions)
        if self.tty:
            self._start_live()

    # -- rich (TTY) ------------------------------------------------------------------------------------
    def _start_live(self) -> None:
        # Imported here: rich costs start-up time that a non-interactive agent never needs.
        from rich.console import Console
        from rich.progress import BarColumn, TextColumn
        from rich.progress import Progress as RichProgress

        self._console = Console(file=self.out, highlight=False, soft_wrap=False)
        self._live = RichProgress(
            TextColumn("[{task.completed}/{task.total}]"),
            BarColumn(bar_width=12),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.description}", markup=False),
            console=self._console,
            transient=True,
            refresh_per_second=4,
            expand=False,
        )
        self._task = self._live.add_task("starting", total=self.total, eta="?")
        self._live.start()

    def _refresh(self) -> None:
        if self._live is None:
            return
        parts = [f"{self._label}" if self._label else ""]
        if self._phase:
            parts.append(self._phase)
        if self._last:
            parts.append(f"last: {self._last}")
        if self._open:
            parts.append(self._open.split(";", 1)[0])
        description = " · ".join(p for p in parts if p)
        # One screen line: rich would wrap a long description onto lines it then has to redraw.
        width = max(self._console.width - 30, 10)
        if len(description) > width:
            description = description[: width - 1] + "…"
        self._live.update(self._task, description=description, completed=self.done)

    # -- the interface the sweep uses -------------------------------------------------------------------
    def eta_s(self, remaining: int) -> float | None:
        if not self.durations:
            return None
        return sum(self.durations) / len(self.durations) * remaining

    fmt_s = staticmethod(fmt_s)

    def start(self, index: int, label: str) -> None:
        label = safe_text(label)  # a label (a GGUF's file name) is one visible line, never a control sequence
        self._index, self._label, self._phase = index, label, "starting"
        self._eos_first = False
        if self.tty:
            self._refresh()
        else:
            self._plain(f"[{index}/{self.total}] {label} … running")

    def phase(self, text: str) -> None:
        """The current config's phase (cooldown with its temperature, load, warm-up, rep k/n)."""
        changed = text.split(" ", 1)[0] != self._phase.split(" ", 1)[0]
        self._phase = text
        if self.tty:
            self._refresh()
        elif changed:
            self._plain(f"[{self._index}/{self.total}]   {text}")

    def event(self, event: dict[str, Any]) -> None:
        """A worker event (``loaded``, ``await``, ``measurement`` ...) turned into a phase."""
        kind = event.get("event")
        if kind == "loaded":
            load_ms = event.get("load_ms")
            self.phase(f"loaded ({load_ms:.0f} ms)" if isinstance(load_ms, (int, float)) else "loaded")
        elif kind == "measurement":
            rep_kind, rep = event.get("kind"), event.get("rep")
            tg = event.get("tg_tps")
            result = f"{rep_kind} rep {rep}" + (f": tg {tg:.1f} t/s" if isinstance(tg, (int, float)) else "")
            self.phase(f"{rep_kind} rep {rep}")
            self._last = result
            if ended_at_first_token(event) and not self._eos_first:
                self._eos_first = True
                self.line(f"[{self._index}/{self.total}] {self._label}: {EOS_FIRST}", style="yellow")
            if self.tty:
                self._refresh()
        elif kind == "soak_start":
            self._soak, self._soak_plain_at_s = event, PLAIN_SOAK_EVERY_S
            self.phase(f"soak 0:00 / {fmt_s(event.get('duration_s'))}")
        elif kind == "soak_window":
            self._soak_window(event)

    def _soak_window(self, window: dict[str, Any]) -> None:
        """The live line follows every window; a log or the journal gets a line a minute, so an overnight
        soak shows it is alive without a line per window."""
        text = self.soak_text(window)
        self.phase(text)
        t0, t_end = (self._soak or {}).get("t"), window.get("t_end")
        if self.tty or not isinstance(t0, (int, float)) or not isinstance(t_end, (int, float)):
            return
        if t_end - t0 >= self._soak_plain_at_s:
            self._plain(f"[{self._index}/{self.total}]   {text}")
            while self._soak_plain_at_s <= t_end - t0:
                self._soak_plain_at_s += PLAIN_SOAK_EVERY_S

    def soak_text(self, window: dict[str, Any]) -> str:
        """The soak's elapsed / total time, the last window's decode speed and the temperature now."""
        soak = self._soak or {}
        t0, t_end = soak.get("t"), window.get("t_end")
        elapsed = t_end - t0 if isinstance(t0, (int, float)) and isinstance(t_end, (int, float)) else None
        text = f"soak {fmt_s(elapsed)} / {fmt_s(soak.get('duration_s'))}"
        tg = window.get("tg_tps")
        if isinstance(tg, (int, float)):
            text += f" · tg {tg:.1f} t/s"
        temp_c = self.read_temp() if self.read_temp is not None else None
        if temp_c is not None:
            text += f" · {temp_c:.1f} °C"
        return text

    def decisions(self, text: str | None) -> None:
        """What the current group of rivals still has open, and how many more rounds its budget allows;
        None once it is settled. Printed once a round, and kept on the live line."""
        self._open = safe_text(text) if text else ""
        if text:
            self.line(f"[{self._index}/{self.total}]   {text}")
        elif self.tty:
            self._refresh()

    def line(self, text: str, style: str | None = None) -> None:
        text = safe_text(text)
        if self._console is not None:
            self._console.print(text, style=style, markup=False, highlight=False)
        else:
            self._plain(text)

    def finish(self, index: int, label: str, outcome: str, duration_s: float, remaining: int) -> None:
        self.durations.append(duration_s)
        self.done += 1
        label, outcome = safe_text(label), safe_text(outcome)
        if self._eos_first and outcome.startswith("ok"):
            outcome = f"{outcome} ({EOS_FIRST_OUTCOME})"
        self._eos_first = False
        eta = fmt_s(self.eta_s(remaining)) if remaining else "0:00"
        self._phase, self._last = "", ""
        text = f"[{index}/{self.total}] {label}  {outcome}  ({duration_s:.1f} s, ETA {eta})"
        if self._console is not None:
            from rich.text import Text

            rendered = Text(f"[{index}/{self.total}] {label}  ")
            rendered.append(outcome, style=outcome_style(outcome) or "")
            rendered.append(f"  ({duration_s:.1f} s, ETA {eta})")
            self._console.print(rendered, highlight=False)
            self._live.update(self._task, eta=eta)
            self._refresh()
        else:
            self._plain(text)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _plain(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
