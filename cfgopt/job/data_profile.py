"""The job's data, measured: each local dataset's samples as prompt and response lengths in tokens.

Resolution follows LLaMA-Factory 0.9.5 (`data/parser.py` `get_dataset_list`, `data/loader.py`
`_load_single_dataset`): `dataset` names entries of `<dataset_dir>/dataset_info.json` (`dataset_dir` defaults to
`data`, relative to the launch folder: cfgopt tries the current folder, then the config's folder and those above
it up to its repository root, as for `deepspeed:`); an entry with `file_name` is a local file, or a folder whose
files are all read; `hf_hub_url`, `ms_hub_url`, `script_url` or `cloud_file_name` are not local, and the job is
then not profiled (the output says so). `dataset_dir: ONLINE` or `REMOTE:...` is never local.

Files: json (a list of rows, or JSON lines) and jsonl, and csv (stdlib); parquet and arrow need pyarrow, which
cfgopt does not import: such a dataset is "not profiled" and says so. Every file goes through the bounded reader
(`user_files.read_bounded`: a FIFO or `/dev/zero` named as a dataset is refused, not read forever), only inside
the config's project (its repository root or the current folder, no hidden path below it).

Formatting: alpaca (instruction + input + history -> output; `chosen`/`rejected` for ranking) and sharegpt
(messages: every user turn and the assistant turn after it; ranking: the last turn's chosen and rejected), with
the entry's `columns` and `tags`, as `data/converter.py` reads them.

A large dataset is sampled: `SAMPLE_SIZE` rows drawn with a fixed seed (the shares and percentiles come from
them) plus the `TAIL_SIZE` rows with the longest text (the maximum length comes from them): a JSON line's
bytes, a list row's strings in UTF-8 (`_list_rows`), a CSV record's bytes. Of JSON lines and CSV records only the rows
drawn are parsed. Profiles are cached by the files' content hash under `$XDG_CACHE_HOME/cfgopt/data-profiles`
(`CFGOPT_CACHE_DIR` first, for tests).
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import marshal
import os
import random
import re
from pathlib import Path

from cfgopt.job.data_location import DATA_CONFIG, LocalData, NotLocal, dataset_info, local_data
from cfgopt.job.data_location import inside as _inside
from cfgopt.job.data_location import project_roots as _project_roots
from cfgopt.job.data_tokens import TEMPLATE_TOKENS, Counter, counter_for, template_allowance
from cfgopt.text.record import Record
from cfgopt.text.user_files import parse_json, read_bounded
from cfgopt.text.writer import write_new

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SAMPLE_SIZE = 2000  # rows drawn for the shares: a share's standard error is at most 1.1 points
TAIL_SIZE = 16  # the rows with the longest text: the longest sample is among them
SEED = 0
MAX_DATASET_BYTES = 512 * 1024 * 1024
PROFILE_VERSION = 2  # bump when a cached profile's meaning changes (2: a JSON list's rows sized in UTF-8)
PROFILED_FORMATS = {"json": "json", "jsonl": "json", "csv": "csv"}
KNOWN_FORMATS = {"arrow", "parquet", "txt"}  # LLaMA-Factory reads them (extras/constants.py FILEEXT2TYPE)


class Sample(Record):
    """One sample in tokens: (prompt, response) per turn, template allowance included; for pairwise data the
    last turn's response is the chosen one and `rejected` the rejected one's length."""

    turns: tuple[tuple[int, int], ...]
    rejected: int | None = None

    @property
    def prompt(self) -> int:
        return sum(src for src, _ in self.turns)

    @property
    def response(self) -> int:
        return sum(tgt for _, tgt in self.turns)

    @property
    def length(self) -> int:
        """Tokens of the longest sequence the sample makes (pairwise: prompt + the longer answer)."""
        last = max(self.turns[-1][1], self.rejected or 0) if self.turns else 0
        return self.prompt + self.response - (self.turns[-1][1] if self.turns else 0) + last


class DataProblem(Record):
    """A dataset the run cannot use, said as a sentence; `stops`: LLaMA-Factory certainly stops on it (an undefined
    name, a file or folder not found, a `columns`/`tags` block that is no object, a file with no rows: `datasets`
    raises `Instruction "train" corresponds to no data!`). A file cfgopt's reader cannot parse may still load in
    `datasets` (a pretty-printed object, a JSON line broken over two lines): not certain."""

    text: str
    stops: bool


class DataProfile(Record):
    """The job's local data measured. `samples`: the seeded sample (shares, percentiles); `tail`: the rows
    with the longest text (the maximum)."""

    datasets: tuple[str, ...]
    files: tuple[str, ...]
    formatting: str
    pairwise: bool
    rows: int
    samples: tuple[Sample, ...]
    tail: tuple[Sample, ...]
    counted_by: str
    exact: bool
    problems: tuple[DataProblem, ...] = ()  # a dataset that could not be read or is empty

    @property
    def sampled(self) -> bool:
        return len(self.samples) < self.rows

    @property
    def counting(self) -> str:
        """How the tokens were counted, the template allowance included (for the end of an output)."""
        return f"tokens {self.counted_by}; {template_allowance()}"

    def describe(self) -> str:
        part = f"a seeded sample of {len(self.samples)} of {self.rows} rows" if self.sampled else f"{self.rows} rows"
        return f"{', '.join(self.datasets)} ({self.formatting}{', pairwise' if self.pairwise else ''}; {part})"


# --------------------------------------------------------------------------- resolution


# --------------------------------------------------------------------------- reading rows


class _Rows(Record):
    rows: int
    drawn: list[Any]  # the seeded sample, parsed
    tail: list[Any]  # the largest rows, parsed


def _draw(count: int, sizes: list[int]) -> tuple[list[int], list[int]]:
    """(indices of the seeded sample, indices of the largest rows not in it)."""
    rng = random.Random(SEED)
    drawn = sorted(rng.sample(range(count), SAMPLE_SIZE)) if count > SAMPLE_SIZE else list(range(count))
    chosen = set(drawn)
    largest = sorted(range(count), key=sizes.__getitem__, reverse=True)[: TAIL_SIZE + len(chosen)]
    return drawn, [i for i in largest if i not in chosen][:TAIL_SIZE]


# Leading whitespace as str.lstrip() sees it: the file is a list when "[" follows it
_STR_SPACE = re.compile(r"\s*")  # re's \s is str.isspace() for str patterns
_ASCII_STR_SPACE = re.compile(rb"[\t\n\x0b\x0c\r\x1c-\x1f ]*")  # the same within ASCII, for bytes


def _json_rows(raw: bytes) -> _Rows:
    text = None if raw.isascii() else raw.decode("utf-8")  # not UTF-8: fails here, on the whole file
    if text is None:
        start = _ASCII_STR_SPACE.match(raw).end()
        is_list = raw[start : start + 1] == b"["
    else:
        start = _STR_SPACE.match(text).end()
        is_list = text[start : start + 1] == "["
    if is_list:  # parsed whole, in C: a row-by-row raw_decode scan was 6x slower on 8M tiny rows
        return _list_rows(parse_json(raw.decode("ascii") if text is None else text))
    # JSON lines: only the rows drawn are parsed; blank lines are those bytes.strip() empties, found without a copy
    lines = [line for line in raw.split(b"\n") if line and not line.isspace()]
    drawn, tail = _draw(len(lines), list(map(len, lines)))
    return _Rows(len(lines), [parse_json(lines[i]) for i in drawn], [parse_json(lines[i]) for i in tail])


def _list_rows(data: Any) -> _Rows:
    """A JSON list's rows, sized by their marshal form (format 2, no back-references): a row's strings in UTF-8
    plus 5 bytes each and a few per other value, whatever the file's indentation or escapes; one C call per row
    (`str(row)` escapes every character: 6x slower on 167 MiB)."""
    if not isinstance(data, list):
        raise ValueError("not a list of rows")
    count = len(data)
    drawn, tail = _draw(count, _sizes(data) if count > SAMPLE_SIZE else [0] * count)
    return _Rows(count, [data[i] for i in drawn], [data[i] for i in tail])


def _sizes(rows: list[Any]) -> list[int]:
    try:
        return list(map(len, map(marshal.dumps, rows, itertools.repeat(2))))
    except ValueError:  # a row nested deeper than marshal goes (2000 levels; json goes deeper from Python 3.13)
        return [len(str(row)) for row in rows]


def _csv_rows(raw: bytes) -> _Rows:
    """CSV rows as `csv.DictReader` reads them, but only the rows drawn are parsed (a 1M-row file parsed whole
    took 9 s, into the time limit on every lint): the records are found by C-level scans (`_csv_records`)."""
    raw.decode("utf-8")  # not UTF-8: fails here, on the whole file
    # DictReader skips blank lines; a record's `\r` (of a `\r\n` break) is the csv module's to drop anyway
    records = list(filter(None, map(bytes.rstrip, _csv_records(raw), itertools.repeat(b"\r"))))
    if not records:
        return _Rows(0, [], [])
    fields = _csv_record(records[0])
    body = records[1:]
    drawn, tail = _draw(len(body), list(map(len, body)))
    return _Rows(len(body), [_csv_dict(fields, body[i]) for i in drawn], [_csv_dict(fields, body[i]) for i in tail])


def _csv_records(raw: bytes) -> list[bytes]:
    """The file's records: a line break ends one where an even number of `"` precedes it (a quoted field holds
    its line breaks; a doubled `""` keeps the parity). An odd count left at the end (a stray quote): lines."""
    end = b"\n" if b"\n" in raw or b"\r" not in raw else b"\r"  # old Mac files end lines with \r
    lines = raw.split(end)
    if lines and not lines[-1]:
        lines.pop()
    if b'"' not in raw:
        return lines
    odd = [count & 1 for count in itertools.accumulate(map(bytes.count, lines, itertools.repeat(b'"')))]
    if odd and odd[-1]:
        return lines
    records, start = [], 0
    for last in itertools.compress(range(len(lines)), (not o for o in odd)):
        records.append(end.join(lines[start : last + 1]))
        start = last + 1
    return records


def _csv_record(record: bytes) -> list[str]:
    limit = csv.field_size_limit(MAX_DATASET_BYTES)  # pandas, which LLaMA-Factory reads CSV with, has no 128 KiB cap
    try:
        return next(csv.reader(io.StringIO(record.decode("utf-8"), newline="")), [])
    finally:
        csv.field_size_limit(limit)


def _csv_dict(fields: list[str], record: bytes) -> dict[Any, Any]:
    """One row as DictReader makes it: missing values None, extra ones a list under the key None."""
    values = _csv_record(record)
    row: dict[Any, Any] = dict(zip(fields, values + [None] * (len(fields) - len(values)), strict=False))
    if len(values) > len(fields):
        row[None] = values[len(fields) :]
    return row


# --------------------------------------------------------------------------- formatting


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value, ensure_ascii=False)


def _alpaca(row: dict[str, Any], entry: dict[str, Any], count: Any) -> Sample:
    """data/converter.py AlpacaDatasetConverter: history pairs, then instruction + "\\n" + input -> output."""
    cols = {"prompt": "instruction", "query": "input", "response": "output", "history": None, "system": None}
    cols.update({k: v for k, v in (entry.get("columns") or {}).items() if k in cols or k in ("chosen", "rejected")})
    src_extra, tgt_extra = TEMPLATE_TOKENS
    turns = []
    history = row.get(cols["history"]) if cols["history"] else None
    for pair in history if isinstance(history, list) else []:
        if isinstance(pair, list) and len(pair) == 2:
            turns.append((count(_text(pair[0])) + src_extra, count(_text(pair[1])) + tgt_extra))
    query = "\n".join(t for t in (_text(row.get(cols["prompt"])), _text(row.get(cols["query"]))) if t)
    system = count(_text(row.get(cols["system"]))) if cols["system"] else 0
    if entry.get("ranking"):
        chosen = count(_text(row.get(cols.get("chosen", "chosen")))) + tgt_extra
        rejected = count(_text(row.get(cols.get("rejected", "rejected")))) + tgt_extra
        return Sample((*turns, (count(query) + src_extra + system, chosen)), rejected)
    return Sample((*turns, (count(query) + src_extra + system, count(_text(row.get(cols["response"]))) + tgt_extra)))


def _sharegpt(row: dict[str, Any], entry: dict[str, Any], count: Any) -> Sample:
    """data/converter.py SharegptDatasetConverter: an optional system message, then turns alternating prompt
    (user, observation) and response (assistant, function); ranking: the prompt is every message and the
    response the `chosen` / `rejected` message (processor/pairwise.py encodes one turn)."""
    cols = {"messages": "conversations", "chosen": "chosen", "rejected": "rejected", **(entry.get("columns") or {})}
    tags = {"role_tag": "from", "content_tag": "value", "system_tag": "system", **(entry.get("tags") or {})}
    messages = row.get(cols["messages"])
    messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    system = 0
    if _has_system(messages, tags):
        system, messages = count(_text(_content(messages[0], tags))), messages[1:]
    lengths = [count(_text(_content(m, tags))) for m in messages]
    src_extra, tgt_extra = TEMPLATE_TOKENS
    if entry.get("ranking"):
        prompt = sum(lengths) + src_extra * max(1, (len(lengths) + 1) // 2) + system
        chosen = count(_text(_content(row.get(cols["chosen"]), tags))) + tgt_extra
        rejected = count(_text(_content(row.get(cols["rejected"]), tags))) + tgt_extra
        return Sample(((prompt, chosen),), rejected)
    turns = [(lengths[i] + src_extra, lengths[i + 1] + tgt_extra) for i in range(0, len(lengths) - 1, 2)]
    return _with_system(Sample(tuple(turns)), system)


def _has_system(messages: list[Any], tags: dict[str, str]) -> bool:
    return bool(messages) and isinstance(messages[0], dict) and messages[0].get(tags["role_tag"]) == tags["system_tag"]


def _content(message: Any, tags: dict[str, str]) -> Any:
    return message.get(tags["content_tag"]) if isinstance(message, dict) else message


def _with_system(sample: Sample, system: int) -> Sample:
    if not sample.turns or not system:
        return sample
    (src, tgt), rest = sample.turns[0], sample.turns[1:]
    return sample._replace(turns=((src + system, tgt), *rest))


_FORMATTERS = {"alpaca": _alpaca, "sharegpt": _sharegpt, "openai": _sharegpt}


# --------------------------------------------------------------------------- profiling one dataset


class _Measured(Record):
    rows: int
    samples: list[Sample]
    tail: list[Sample]


def _files_of(folder: Path, entry: dict[str, Any]) -> list[Path]:
    path = folder / str(entry.get("file_name"))
    if path.is_dir():
        return sorted(p for p in path.iterdir() if not p.name.startswith("."))
    return [path]


def cache_dir() -> Path:
    given = os.environ.get("CFGOPT_CACHE_DIR", "")
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(given) if given else (Path(xdg) / "cfgopt" if os.path.isabs(xdg) else Path.home() / ".cache" / "cfgopt")
    return base / "data-profiles"


def _cached(key: str) -> _Measured | None:
    try:
        data = json.loads(read_bounded(cache_dir() / f"{key}.json", MAX_DATASET_BYTES))
        return _Measured(
            data["rows"],
            [Sample(tuple(map(tuple, s[0])), s[1]) for s in data["samples"]],
            [Sample(tuple(map(tuple, s[0])), s[1]) for s in data["tail"]],
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def _store(key: str, measured: _Measured) -> None:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        data = {"rows": measured.rows, "samples": measured.samples, "tail": measured.tail}
        write_new(folder / f"{key}.json", json.dumps(data).encode("utf-8"))
    except OSError:  # a read-only cache folder costs speed, never the profile
        pass


def measure_file(path: Path, entry: dict[str, Any], counter: Counter) -> _Measured:
    """One file's rows measured (cached by content hash, entry and counter); ValueError / OSError when it
    cannot be read as its extension says."""
    raw = read_bounded(path, MAX_DATASET_BYTES)
    digest = hashlib.sha256(raw)
    digest.update(
        json.dumps([entry, counter.key, SAMPLE_SIZE, TAIL_SIZE, SEED, PROFILE_VERSION], sort_keys=True).encode()
    )
    key = digest.hexdigest()[:32]
    cached = _cached(key)
    if cached is not None:
        return cached
    ext = path.suffix[1:].lower()
    rows = _csv_rows(raw) if PROFILED_FORMATS.get(ext) == "csv" else _json_rows(raw)
    formatter = _FORMATTERS.get(str(entry.get("formatting", "alpaca")), _alpaca)

    def samples(items: list[Any]) -> list[Sample]:
        return [formatter(row, entry, counter.count) for row in items if isinstance(row, dict)]

    measured = _Measured(rows.rows, samples(rows.drawn), samples(rows.tail))
    _store(key, measured)
    return measured


# --------------------------------------------------------------------------- the job's data


def _entry_files(folder: Path, name: str, info: dict[str, Any]) -> tuple[list[Path], DataProblem | NotLocal | None]:
    """(the files of a local dataset, None) or ([], the problem / why it is not local)."""
    entry = info.get(name)
    if not isinstance(entry, dict):
        text = f"`{name}` is not in {DATA_CONFIG} (LLaMA-Factory stops: `Undefined dataset {name}`)"
        return [], DataProblem(text, True)
    remote = [k for k in ("hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name") if k in entry]
    if remote:
        return [], NotLocal(f"`{name}` is not local ({remote[0]})")
    malformed = _malformed(name, entry)
    if malformed:
        return [], malformed
    try:
        files = _files_of(folder, entry)
        found = bool(files) and all(f.exists() for f in files)
    except OSError as exc:  # a 300-character file_name (ENAMETOOLONG), a folder that cannot be listed
        text = f"`{name}`: {DATA_CONFIG}'s file_name cannot be read ({exc.strerror or exc}): not found"
        return [], DataProblem(text, True)
    if not found:
        return [], DataProblem(f"`{name}`: {folder.name}/{entry.get('file_name')} not found", True)
    return files, None


def _malformed(name: str, entry: dict[str, Any]) -> DataProblem | None:
    """Why LLaMA-Factory 0.9.5 cannot read the entry's `columns` / `tags` (`data/parser.py` `DatasetAttr.join`
    calls `.get` on them: certain; a column name that is not a string fails the converter's row lookup, where
    the converter reads that column), or None."""
    for block in ("columns", "tags"):
        value = entry.get(block)
        if value is None:
            continue
        if not isinstance(value, dict):
            text = f"`{name}`: `{block}` is a {type(value).__name__}, not an object: LLaMA-Factory stops reading it"
            return DataProblem(text, True)
        for key, column in value.items():
            if column is not None and not isinstance(column, str):
                kind = type(column).__name__
                text = (
                    f"`{name}`: `{block}.{key}` is a {kind}, not a name: LLaMA-Factory fails where it reads that column"
                )
                return DataProblem(text, False)
    return None


def _profile_files(name: str, files: list[Path], entry: dict[str, Any], counter: Counter, roots: list[Path]):
    """(measured rows of one dataset, problem or None, not-local reason or None)."""
    total, samples, tail = 0, [], []
    for path in files:
        ext = path.suffix[1:].lower()
        if ext not in PROFILED_FORMATS:
            known = ext in KNOWN_FORMATS
            return None, None, f"`{name}`: {ext or 'no extension'} files are {'not profiled' if known else 'unknown'}"
        if not _inside(path, roots):
            return None, None, f"`{name}`: {path.name} lies outside the project (not read)"
        try:
            measured = measure_file(path, entry, counter)
        except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
            text = f"`{name}`: {path.name} cannot be read ({str(exc).split(chr(10))[0][:160]})"
            return None, DataProblem(text, False), None
        total += measured.rows
        samples += measured.samples
        tail += measured.tail
    return _Measured(total, samples, tail), None, None


def profile(names: list[str], folder: Path, counter: Counter, roots: list[Path]) -> DataProfile | NotLocal:
    """The datasets `names` of `folder/dataset_info.json`, measured with `counter`."""
    info = dataset_info(folder)
    if isinstance(info, NotLocal):
        return info
    total, samples, tail, problems, shown, formats, pairwise = 0, [], [], [], [], set(), False
    for name in names:
        files, why = _entry_files(folder, name, info)
        if isinstance(why, NotLocal):
            return why
        if why is not None:
            problems.append(why)  # undefined, not found, malformed: the job's problem, said as such
            continue
        entry = info[name]
        measured, problem, not_local = _profile_files(name, files, entry, counter, roots)
        if not_local is not None:
            return NotLocal(not_local)
        if problem is not None or measured is None:
            problems.append(problem or DataProblem(f"`{name}` cannot be read", False))
            continue
        if measured.rows == 0:
            text = f"`{name}`: {', '.join(f.name for f in files)} holds no rows (`datasets` stops: no data)"
            problems.append(DataProblem(text, True))
        total += measured.rows
        samples += measured.samples
        tail += measured.tail
        shown += [f.name for f in files]
        formats.add(str(entry.get("formatting", "alpaca")))
        pairwise = pairwise or bool(entry.get("ranking"))
    if len(samples) > SAMPLE_SIZE:  # several datasets: one seeded sample of them all
        samples = random.Random(SEED).sample(samples, SAMPLE_SIZE)
    formatting = "+".join(sorted(formats)) or "none"
    return DataProfile(
        tuple(names),
        tuple(shown),
        formatting,
        pairwise,
        total,
        tuple(samples),
        tuple(tail),
        counter.how,
        counter.exact,
        tuple(problems),
    )


def profile_of(dataset: Any, dataset_dir: Any, model: Any, config: Path) -> DataProfile | NotLocal | None:
    """A job's training data measured (its `dataset`, `dataset_dir` and `model_name_or_path`, the config's path);
    NotLocal with the reason when it is not local; None when the job names no dataset."""
    found = local_data(dataset, dataset_dir, config)
    return measure(found, model, config) if isinstance(found, LocalData) else found


def measure(found: LocalData, model: Any, config: Path) -> DataProfile | NotLocal:
    """The profile of local data (`data_location.local_data`'s names and folder)."""
    names, folder = found.names, found.folder
    counter = counter_for(model, config.parent)
    return profile(names, folder, counter, _project_roots(config))
