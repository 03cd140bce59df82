"""llama-bench's default output (``-o md``): its table of model, size, params, backend, the knobs that were
varied or moved off llama-bench's default, the test and t/s (mean ± stdev), then the build line."""

from __future__ import annotations

from typing import Any

from edgeprof.report.render.llama_bench.values import text_value

# field -> (header, width); a negative width is left-aligned, as llama-bench's %*s
_WIDTHS: dict[str, tuple[str, int]] = {
    "model": ("model", -30), "size": ("size", 10), "params": ("params", 10), "backend": ("backend", -10),
    "n_gpu_layers": ("ngl", 3), "n_threads": ("threads", 7), "n_batch": ("n_batch", 7),
    "n_ubatch": ("n_ubatch", 8), "type_k": ("type_k", 6), "type_v": ("type_v", 6), "flash_attn": ("fa", 3),
    "test": ("test", 15), "t/s": ("t/s", 20),
}  # fmt: skip
# llama-bench shows a knob only when it was varied or moved off its default
_DEFAULTS: dict[str, Any] = {
    "n_batch": 2048,
    "n_ubatch": 512,
    "type_k": "f16",
    "type_v": "f16",
    "flash_attn": -1,
}


def _columns(records: list[dict[str, Any]]) -> list[str]:
    cpu = all(r["backends"] in ("CPU", "BLAS") for r in records)
    cols = ["model", "size", "params", "backend"]
    if not cpu:
        cols.append("n_gpu_layers")
    if cpu or len({r["n_threads"] for r in records}) > 1:
        cols.append("n_threads")
    for name, default in _DEFAULTS.items():
        values = {r[name] for r in records}
        if len(values) > 1 or values != {default}:
            cols.append(name)
    return [*cols, "test", "t/s"]


def _cell(name: str, r: dict[str, Any]) -> str:
    if name == "model":
        return str(r["model_type"])
    if name == "size":
        size = int(r["model_size"])
        return f"{size / 1024**2:.2f} MiB" if size < 1024**3 else f"{size / 1024**3:.2f} GiB"
    if name == "params":
        n = int(r["model_n_params"])
        return f"{n / 1e6:.2f} M" if n < 1e9 else f"{n / 1e9:.2f} B"
    if name == "backend":
        return str(r["backends"])
    if name == "test":
        return label_of_test(r["n_prompt"], r["n_gen"], r["n_depth"])
    if name == "t/s":
        return f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}"
    return text_value(name, r[name])


def label_of_test(n_prompt: int, n_gen: int, n_depth: int) -> str:
    """llama-bench's test column: pp512, tg128, pp512+tg128, with " @ d<depth>" at a depth."""
    label = f"pp{n_prompt}" if n_gen == 0 else f"tg{n_gen}" if n_prompt == 0 else f"pp{n_prompt}+tg{n_gen}"
    return label + (f" @ d{n_depth}" if n_depth > 0 else "")


def _row(cells: list[str], widths: list[int]) -> str:
    return "|" + "".join(
        f" {c:<{-w}} |" if w < 0 else f" {c:>{w}} |" for c, w in zip(cells, widths, strict=True)
    )


def render_markdown(records: list[dict[str, Any]]) -> str:
    if not records:
        return ""
    cols = _columns(records)
    widths = [_WIDTHS[c][1] for c in cols]
    lines = [_row([_WIDTHS[c][0] for c in cols], widths)]
    lines.append("|" + "".join(f" {'-' * (abs(w) - 1)}{':' if w > 0 else '-'} |" for w in widths))
    lines += [_row([_cell(c, r) for c in cols], widths) for r in records]
    first = records[0]
    lines += ["", f"build: {first['build_commit']} ({first['build_number']})"]
    return "\n".join(lines) + "\n"
