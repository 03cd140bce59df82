"""Task sets in llama-perplexity's three layouts, and its seeded choice of a subset (no llama.cpp here).

The layouts are the ones ``llama-perplexity --hellaswag / --winogrande / --multiple-choice`` reads
(tools/perplexity/perplexity.cpp in llama.cpp):

- HellaSwag: 6 lines a task: ``activity_label: ctx``, the index of the right ending (0-3), the 4 endings.
- Winogrande: CSV lines ``index,sentence,choice1,choice2,answer`` with one ``_`` in the sentence (where a
  choice goes) and answer 1 or 2; the sentence may be in double quotes (then it may hold commas).
- multiple choice: binary, little-endian: ``u32 n_task``, ``u32 offset[n_task]``, then per task the
  question, ``mc1`` (u32 n answers, each a u32-length string, n i32 labels) and ``mc2`` (the same, unused).

Where llama-perplexity skips a line it cannot parse (with a log line) and goes on, edgeprof refuses the file
with the first bad line named: a result over a silently shorter set is not the result the user asked for.

The subset: llama-perplexity seeds ``std::mt19937`` with 1 whatever ``--seed`` says (the seed is written
into the source), and draws differently per task kind; ``select`` reproduces each draw (libstdc++'s
``uniform_int_distribution`` for HellaSwag, a float32 scaling of the raw draw for the other two), so
``seed = 1`` picks exactly the tasks llama-perplexity picks, and another seed another subset drawn the same
way.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

KINDS = ("hellaswag", "winogrande", "multiple-choice")
LLAMA_PERPLEXITY_SEED = 1  # std::mt19937 rng(1) in each of the three scorers
MAX_ANSWERS = 100  # llama-perplexity refuses a multiple-choice task with more


class TaskFileError(ValueError):
    """A task file that cannot be used; the message names the file's place (line or byte offset)."""


@dataclass(frozen=True)
class Task:
    """One task, kind-neutral: ``prefix`` + ``joiner`` + ``endings[i]`` (+ ``suffix``) is the i-th sequence;
    ``gold`` the indices of the right endings (one for HellaSwag and Winogrande, any for multiple choice).

    Winogrande puts the choice inside the sentence (``first`` + choice + ``second``): ``suffix`` is the
    part after the blank, and the scorer counts only its tokens where it can (see score.py)."""

    index: int  # position in the file (0-based task number)
    prefix: str
    endings: tuple[str, ...]
    gold: tuple[int, ...]
    joiner: str = " "
    suffix: str = ""

    def sequence(self, i: int) -> str:
        return self.prefix + self.joiner + self.endings[i] + self.suffix


# ---------------------------------------------------------------- parsing


def parse_hellaswag(data: bytes, name: str) -> list[Task]:
    text = _utf8(data, name)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's last newline (std::getline yields no line after it)
    if not lines:
        raise TaskFileError(f"{name}: empty, no HellaSwag task")
    if len(lines) % 6 != 0:
        first_bad = len(lines) - len(lines) % 6 + 1
        raise TaskFileError(
            f"{name}: line {first_bad}: {len(lines)} lines, not a multiple of 6 (a task is 6 lines): "
            "truncated or malformed"
        )
    tasks = []
    for t in range(len(lines) // 6):
        label = lines[6 * t + 1].strip()
        if label not in ("0", "1", "2", "3"):
            raise TaskFileError(
                f"{name}: line {6 * t + 2}: expected the right ending's index 0-3, got {label!r}"
            )
        endings = tuple(lines[6 * t + 2 : 6 * t + 6])
        tasks.append(Task(index=t, prefix=lines[6 * t], endings=endings, gold=(int(label),)))
    return tasks


def _csv_commas(line: str) -> list[int]:
    """The first four commas outside double quotes (llama-perplexity's own scan, quotes not unescaped)."""
    pos: list[int] = []
    quoted = False
    for i, ch in enumerate(line):
        if quoted:
            quoted = ch != '"'
        elif ch == '"':
            quoted = True
        elif ch == ",":
            pos.append(i)
            if len(pos) == 4:
                break
    return pos


def parse_winogrande(data: bytes, name: str) -> list[Task]:
    text = _utf8(data, name)
    lines = text.split("\n")
    if lines[-1] != "":
        # llama-perplexity's reader stops at end of file: a last line without its newline is never read,
        # so a file cut short there would score one task fewer than it says
        raise TaskFileError(f"{name}: line {len(lines)}: no newline at the end: truncated?")
    lines.pop()
    tasks: list[Task] = []
    for no, line in enumerate(lines, start=1):
        commas = _csv_commas(line)
        if no == 1 and len(commas) == 4 and line[commas[3] + 1 :].strip().lower() == "answer":
            continue  # a header line (index,sentence,option1,option2,answer)
        if len(commas) != 4:
            raise TaskFileError(
                f"{name}: line {no}: expected 5 comma-separated fields, found {len(commas) + 1}"
            )
        c0, c1, c2, c3 = commas
        quoted = line[c0 + 1 : c0 + 2] == '"'  # quotes dropped, a doubled quote inside kept as it is
        sentence = line[c0 + 2 : c1 - 1] if quoted else line[c0 + 1 : c1]
        where = sentence.find("_")
        if where < 0:
            raise TaskFileError(f"{name}: line {no}: no '_' (the blank a choice fills) in the sentence")
        answer = line[c3 + 1 :].strip()
        if answer not in ("1", "2"):
            raise TaskFileError(f"{name}: line {no}: expected answer 1 or 2, got {answer!r}")
        tasks.append(
            Task(
                index=len(tasks),
                prefix=sentence[:where],
                endings=(line[c1 + 1 : c2], line[c2 + 1 : c3]),
                gold=(int(answer) - 1,),
                joiner="",
                suffix=sentence[where + 1 :],
            )
        )
    if not tasks:
        raise TaskFileError(f"{name}: no Winogrande task")
    return tasks


class _Reader:
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.name, self.pos = data, name, 0

    def u32(self, what: str) -> int:
        if self.pos + 4 > len(self.data):
            raise TaskFileError(f"{self.name}: byte {self.pos}: truncated in {what}")
        (v,) = struct.unpack_from("<I", self.data, self.pos)
        self.pos += 4
        return int(v)

    def string(self, what: str) -> str:
        n = self.u32(what)
        if self.pos + n > len(self.data):
            raise TaskFileError(f"{self.name}: byte {self.pos}: truncated in {what} ({n} bytes announced)")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TaskFileError(f"{self.name}: byte {self.pos - n}: {what} is not UTF-8") from None

    def answers(self, what: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
        n = self.u32(f"{what} count")
        if n > MAX_ANSWERS:
            raise TaskFileError(
                f"{self.name}: byte {self.pos - 4}: {n} answers in {what} (at most {MAX_ANSWERS})"
            )
        answers = tuple(self.string(f"{what} answer {i}") for i in range(n))
        if self.pos + 4 * n > len(self.data):
            raise TaskFileError(f"{self.name}: byte {self.pos}: truncated in {what} labels")
        labels = struct.unpack_from(f"<{n}i", self.data, self.pos)
        self.pos += 4 * n
        return answers, tuple(int(x) for x in labels)


def parse_multiple_choice(data: bytes, name: str) -> list[Task]:
    r = _Reader(data, name)
    n_task = r.u32("the task count")
    if n_task == 0:
        raise TaskFileError(f"{name}: byte 0: no tasks")
    offsets = [r.u32(f"the offset of task {i}") for i in range(n_task)]
    tasks = []
    for i, off in enumerate(offsets):
        if off >= len(data):
            raise TaskFileError(
                f"{name}: byte {4 + 4 * i}: task {i} starts at {off}, past the end ({len(data)})"
            )
        r.pos = off
        where = f"task {i}"
        question = r.string(f"{where} question")
        answers, labels = r.answers(f"{where} mc1")
        r.answers(f"{where} mc2")  # read for the layout's sake: llama-perplexity does not score it either
        if not question or not answers or any(not a for a in answers):
            raise TaskFileError(f"{name}: byte {off}: {where} has an empty question or answer")
        gold = tuple(j for j, lab in enumerate(labels) if lab == 1)
        if not gold:
            raise TaskFileError(f"{name}: byte {off}: {where} has no answer labelled 1 (right)")
        tasks.append(Task(index=i, prefix=question, endings=answers, gold=gold))
    return tasks


PARSERS = {
    "hellaswag": parse_hellaswag,
    "winogrande": parse_winogrande,
    "multiple-choice": parse_multiple_choice,
}


def parse_tasks(kind: str, data: bytes, name: str) -> list[Task]:
    """Every task of a file of ``kind``; TaskFileError naming the first bad line (or byte) otherwise."""
    return PARSERS[kind](data, name)


def _utf8(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TaskFileError(f"{name}: line {line}: not UTF-8 text") from None


# ---------------------------------------------------------------- the seeded subset


class MT19937:
    """The 32-bit Mersenne Twister as ``std::mt19937`` (seeded like ``std::mt19937 rng(seed)``)."""

    def __init__(self, seed: int) -> None:
        mt = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
        self.mt, self.i = mt, 624

    def _twist(self) -> None:
        mt = self.mt
        for k in range(624):
            y = (mt[k] & 0x80000000) | (mt[(k + 1) % 624] & 0x7FFFFFFF)
            mt[k] = mt[(k + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
        self.i = 0

    def __call__(self) -> int:
        if self.i >= 624:
            self._twist()
        y = self.mt[self.i]
        self.i += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)


def uniform_below(rng: MT19937, n: int) -> int:
    """``std::uniform_int_distribution<size_t>(0, n - 1)(rng)`` as libstdc++ (GCC >= 11) computes it from a
    32-bit generator: Lemire's multiply-and-reject. libc++ (clang) draws differently."""
    product = rng() * n
    low = product & 0xFFFFFFFF
    if low < n:
        threshold = ((1 << 32) - n) % n
        while low < threshold:
            product = rng() * n
            low = product & 0xFFFFFFFF
    return product >> 32


def _f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (ties to even), as a C++ float conversion rounds."""
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _float_pick(rng: MT19937, n: int) -> int:
    """``int(scale * rng() * n)`` in float32 with ``scale = 1 / (1.f + (float) rng.max())`` (= 2^-32): the
    draw rounds to 24 bits before scaling, as in llama-perplexity's Winogrande and multiple-choice choice."""
    # (float) draw rounds to 24 bits; times 2^-32 is exact; times n is exact in float64 (24 + 24 bits), then
    # rounded to float32 as the C++ float product is
    x = _f32(_f32(float(rng())) * 2.0**-32 * float(n))
    return min(int(x), n - 1)  # a draw that rounds up to 2^32 would index one past the end in C++


def select(kind: str, n_available: int, n_tasks: int | None, seed: int) -> list[int]:
    """The file positions of the tasks scored, in the order scored (llama-perplexity's order for seed 1).

    ``n_tasks`` None or >= the file's count: every task, in file order, for Winogrande and multiple choice
    (llama-perplexity draws no subset then); HellaSwag always draws (its tasks come out shuffled)."""
    rng = MT19937(seed)
    if kind == "hellaswag":
        left = list(range(n_available))
        count = n_available if n_tasks is None else min(n_tasks, n_available)
        return [left.pop(uniform_below(rng, len(left))) for _ in range(count)]
    if n_tasks is None or n_tasks >= n_available:
        return list(range(n_available))
    aux = list(range(n_available))
    out = []
    for _ in range(n_tasks):
        j = _float_pick(rng, len(aux))
        out.append(aux[j])
        aux[j] = aux[-1]
        aux.pop()
    return out


def encode_multiple_choice(tasks: list[tuple[str, list[str], list[int]]]) -> bytes:
    """A multiple-choice file in llama-perplexity's binary layout from (question, answers, labels) triples,
    labels 1 for a right answer and 0 otherwise (``mc2`` written empty, as llama-perplexity ignores it)."""

    def string(s: str) -> bytes:
        raw = s.encode("utf-8")
        return struct.pack("<I", len(raw)) + raw

    bodies = []
    for question, answers, labels in tasks:
        if len(answers) != len(labels):
            raise ValueError(f"{question!r}: {len(answers)} answers, {len(labels)} labels")
        mc1 = struct.pack("<I", len(answers)) + b"".join(string(a) for a in answers)
        mc1 += struct.pack(f"<{len(labels)}i", *labels)
        bodies.append(string(question) + mc1 + struct.pack("<I", 0))
    offset = 4 + 4 * len(tasks)
    offsets = []
    for body in bodies:
        offsets.append(offset)
        offset += len(body)
    return struct.pack(f"<I{len(tasks)}I", len(tasks), *offsets) + b"".join(bodies)
