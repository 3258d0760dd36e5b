"""The hostile-input matrix of ``contrastext eval``, ``encode`` and ``plot`` (issue 10).

Every case must end the same way: exit code 2, exactly one line on stderr and it starts with ``error:``, no
traceback, and the message names what is wrong (the file, the line, the option). The commands run in-process
through ``contrastext.cli.main``; a few cases run again as a real ``python -m contrastext`` process, with
stdin closed, to check what a terminal would show.

Cases needing permissions (a read-only folder, an unreadable file) are skipped when the tests run as root,
which ignores permissions.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from contrastext.cli import main
from tests.robustness import hostile

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass
class NeedsPermissions:
    """A case that relies on file permissions: skipped as root (root ignores them)."""

    build: Callable

    def __call__(self, env, tmp):
        return self.build(env, tmp)


@dataclass
class Env:
    """What the cases build on: the tiny model, the real data root and a small copy of it per case."""

    model: str
    nan_model: str
    data: Path

    def root(self, tmp: Path) -> Path:
        return hostile.small_data_root(self.data, tmp / "data")

    def model_copy(self, tmp: Path) -> Path:
        return hostile.copy_model(self.model, tmp / "model")


@pytest.fixture(scope="module")
def env(tiny_bert_path, data_root, tmp_path_factory) -> Env:
    nan = hostile.nan_model(tiny_bert_path, tmp_path_factory.mktemp("nan") / "model")
    return Env(model=tiny_bert_path, nan_model=str(nan), data=data_root)


def texts_file(tmp: Path, content: bytes = b"a first text\nthe second text\n") -> Path:
    path = tmp / "texts.txt"
    path.write_bytes(content)
    return path


def encode(env: Env, tmp: Path, model: str | Path | None = None, texts: Path | None = None, output=None, *extra):
    return [
        "encode", "-m", str(model or env.model), "-i", str(texts or texts_file(tmp)),
        "-o", str(output or tmp / "out.npy"), "--no-progress", *extra,
    ]  # fmt: skip


def evaluate(env: Env, tmp: Path, tasks: str, root: Path | None = None, model=None, *extra):
    return [
        "eval", "-m", str(model or env.model), "--tasks", tasks,
        "--data-root", str(root or env.root(tmp)), "--no-progress", *extra,
    ]  # fmt: skip


def read_only_folder(tmp: Path) -> Path:
    folder = tmp / "read-only"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    return folder


def empty_folder(tmp: Path) -> Path:
    folder = tmp / "empty"
    folder.mkdir()
    return folder


def file_in_the_way(tmp: Path) -> Path:
    path = tmp / "a-file"
    path.write_text("x", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------------- model cases


def damaged_model(how: str, name: str = "model.safetensors"):
    def build(env: Env, tmp: Path):
        if name == "model.safetensors":
            folder = env.model_copy(tmp)
        else:
            folder = hostile.with_training_projection(env.model, tmp / "model")
        hostile.corrupt_safetensors(folder / name, how)
        return encode(env, tmp, folder), [str(folder / name)]

    return build


def remote_code(env: Env, tmp: Path):
    folder = hostile.add_remote_code(env.model_copy(tmp), tmp / "ran", known_model_type=False)
    return encode(env, tmp, folder), ["trust_remote_code", "--trust-remote-code"]


def pickle_bin(env: Env, tmp: Path):
    folder = hostile.replace_weights_with_pickle(env.model_copy(tmp), tmp / "pwned")
    return encode(env, tmp, folder), ["pytorch_model.bin", "refused to unpickle"]


def no_tokenizer(env: Env, tmp: Path):
    folder = hostile.drop_tokenizer(env.model_copy(tmp))
    return encode(env, tmp, folder), ["no tokenizer files", str(folder)]


def big_tokenizer(env: Env, tmp: Path):
    folder = hostile.grow_tokenizer(env.model_copy(tmp))
    return encode(env, tmp, folder), ["tokenizer has 30525 tokens", "30522 rows"]


def folder_file(name: str, content: bytes, expected: str):
    def build(env: Env, tmp: Path):
        folder = env.model_copy(tmp)
        (folder / name).write_bytes(content)
        return encode(env, tmp, folder), [str(folder / name), expected]

    return build


def nan_encode(env: Env, tmp: Path):
    texts = texts_file(tmp)
    return encode(env, tmp, env.nan_model, texts), ["NaN or infinite", f"{texts}:1", "nothing was written"]


def nan_eval(env: Env, tmp: Path):
    return evaluate(env, tmp, "stsb:dev", model=env.nan_model), ["NaN or infinite"]


MODEL_CASES: dict[str, Callable] = {
    "model missing": lambda env, tmp: (encode(env, tmp, tmp / "nope"), [str(tmp / "nope"), "no such file"]),
    "model is a file": lambda env, tmp: (encode(env, tmp, file_in_the_way(tmp)), ["not a folder"]),
    "model folder empty": lambda env, tmp: (encode(env, tmp, empty_folder(tmp)), [str(tmp / "empty"), "no model"]),
    **{f"model.safetensors {how}": damaged_model(how) for how in hostile.CORRUPTIONS},
    **{
        f"projection {how}": damaged_model(how, "contrastext_projection.safetensors")
        for how in ("truncated", "empty", "garbage", "bad_header_json")
    },
    "remote code": remote_code,
    "pickle .bin": pickle_bin,
    "no tokenizer files": no_tokenizer,
    "tokenizer larger than embeddings": big_tokenizer,
    "config.json not JSON": folder_file("config.json", b"{not json", "config.json"),
    "modules.json not JSON": folder_file("modules.json", b"[{", "not valid JSON"),
    "modules.json of strings": folder_file("modules.json", b'["a", "b"]', "module objects"),
    "max_seq_length not a number": folder_file(
        "sentence_bert_config.json", b'{"max_seq_length": "long"}', "max_seq_length"
    ),
    "pooling config not UTF-8": folder_file("1_Pooling/config.json", b"\xff\xfe{}", "UTF-8"),
    "NaN model encode": nan_encode,
    "NaN model eval": nan_eval,
}


# ----------------------------------------------------------------------------------------------- encode cases


def input_case(content: bytes, *expected: str):
    def build(env: Env, tmp: Path):
        texts = texts_file(tmp, content)
        return encode(env, tmp, texts=texts), [str(texts), *expected]

    return build


def unreadable_input(env: Env, tmp: Path):
    texts = texts_file(tmp)
    texts.chmod(0)
    return encode(env, tmp, texts=texts), [str(texts), "cannot read"]


ENCODE_CASES: dict[str, Callable] = {
    "batch size 0": lambda env, tmp: (encode(env, tmp, None, None, None, "--batch-size", "0"), ["--batch-size"]),
    "batch size not a number": lambda env, tmp: (
        encode(env, tmp, None, None, None, "--batch-size", "many"), ["--batch-size"]
    ),
    "unknown option": lambda env, tmp: (encode(env, tmp, None, None, None, "--fast"), ["--fast"]),
    "missing --input": lambda env, tmp: (["encode", "-m", env.model, "-o", str(tmp / "o.npy")], ["--input"]),
    "input missing": lambda env, tmp: (encode(env, tmp, texts=tmp / "none.txt"), ["none.txt", "does not exist"]),
    "input is a folder": lambda env, tmp: (encode(env, tmp, texts=tmp), [str(tmp), "folder"]),
    "input unreadable": NeedsPermissions(unreadable_input),
    "input empty": input_case(b"", "no text"),
    "input blank line": input_case(b"one\n\nthree\n", ":2:", "empty line"),
    "input only newlines": input_case(b"\n\n", ":1:"),
    "input invalid UTF-8": input_case(b"good\nbad \xc3\x28 here\n", ":2:", "UTF-8"),
    "input latin-1": input_case("caf\xe9\n".encode("latin-1"), ":1:", "UTF-8"),
    "output is a folder": lambda env, tmp: (encode(env, tmp, output=tmp), ["--output", "is a folder"]),
    "output under a file": lambda env, tmp: (
        encode(env, tmp, output=file_in_the_way(tmp) / "out.npy"), ["--output", "is a file"]
    ),
    "output in a read-only folder": NeedsPermissions(
        lambda env, tmp: (encode(env, tmp, output=read_only_folder(tmp) / "o.npy"), ["--output", "cannot write"])
    ),
}


# ----------------------------------------------------------------------------------------------- eval cases


def data_case(relative: str, content: bytes | None, tasks: str, *expected: str, remove: tuple[str, ...] = ()):
    """A small data root with one file replaced by ``content`` (or other files removed)."""

    def build(env: Env, tmp: Path):
        root = env.root(tmp)
        path = root / relative
        if content is not None:
            path.write_bytes(content)
        for name in remove:
            (root / name).unlink()
        return evaluate(env, tmp, tasks, root), [str(path), *expected]

    return build


def gold_score(value: str, line: int = 2):
    def build(env: Env, tmp: Path):
        root = env.root(tmp)
        path = root / hostile.STSB_DEV
        rows = path.read_text(encoding="utf-8").split("\n")
        fields = rows[line - 1].split("\t")
        fields[4] = value
        rows[line - 1] = "\t".join(fields)
        path.write_text("\n".join(rows), encoding="utf-8")
        return evaluate(env, tmp, "stsb:dev", root), [f"{path}:{line}", "outside the range 0-5"]

    return build


def sick_score(env: Env, tmp: Path):
    root = env.root(tmp)
    path = root / hostile.SICK_DEV
    rows = path.read_text(encoding="utf-8").split("\n")
    fields = rows[3].split("\t")
    fields[3] = "0.5"
    rows[3] = "\t".join(fields)
    path.write_text("\n".join(rows), encoding="utf-8")
    return evaluate(env, tmp, "sickr:dev", root), [f"{path}:4", "outside the range 1-5"]


def sts12_gold(content: bytes, *expected: str, subset: str = "MSRpar"):
    def build(env: Env, tmp: Path):
        root = env.root(tmp)
        path = root / hostile.STS12 / f"STS.gs.{subset}.txt"
        path.write_bytes(content)
        return evaluate(env, tmp, "sts12", root), [str(path), *expected]

    return build


def one_class_sst2(env: Env, tmp: Path):
    root = env.root(tmp)
    path = root / hostile.SST2_TRAIN
    rows = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([rows[0], *(row for row in rows[1:] if row.endswith("\t1"))]) + "\n", encoding="utf-8")
    return evaluate(env, tmp, "sst2", root), [str(path), "at least 2 classes"]


def unreadable_data(env: Env, tmp: Path):
    root = env.root(tmp)
    path = root / hostile.STSB_DEV
    path.chmod(0)
    return evaluate(env, tmp, "stsb:dev", root), [str(path), "cannot read"]


def json_case(target: Callable[[Path], Path], *expected: str):
    def build(env: Env, tmp: Path):
        return evaluate(env, tmp, "stsb:dev", None, None, "--json", str(target(tmp))), ["--json", *expected]

    return build


EVAL_CASES: dict[str, Callable] = {
    "eval batch size 0": lambda env, tmp: (evaluate(env, tmp, "stsb:dev", None, None, "--batch-size", "0"), ["--batch-size"]),
    "eval limit 0": lambda env, tmp: (evaluate(env, tmp, "stsb:dev", None, None, "--limit", "0"), ["--limit"]),
    "eval bad aggregation": lambda env, tmp: (
        evaluate(env, tmp, "sts12", None, None, "--aggregation", "median"), ["--aggregation"]
    ),
    "unknown task": lambda env, tmp: (evaluate(env, tmp, "stsb,nosuchtask"), ["nosuchtask"]),
    "unknown split": lambda env, tmp: (evaluate(env, tmp, "stsb:validation"), ["validation"]),
    "empty task list": lambda env, tmp: (evaluate(env, tmp, ",,"), ["--tasks"]),
    "task twice": lambda env, tmp: (evaluate(env, tmp, "stsb:dev,stsb:train"), ["more than once"]),
    "training-only task": lambda env, tmp: (evaluate(env, tmp, "wiki1m"), ["no evaluation"]),
    "data root missing": lambda env, tmp: (evaluate(env, tmp, "stsb:dev", tmp / "nodata"), ["nodata"]),
    "split file missing": lambda env, tmp: (evaluate(env, tmp, "stsb:train"), ["sts-train.csv"]),
    "empty STS file": data_case(hostile.STSB_DEV, b"", "stsb:dev", "no example"),
    "STS file of blank lines": data_case(hostile.STSB_DEV, b"\n\n\n", "stsb:dev"),
    "STS file one column short": data_case(hostile.STSB_DEV, b"a\tb\tc\td\t1.0\tonly one\n", "stsb:dev", ":1:"),
    "STS score not a number": data_case(hostile.STSB_DEV, b"g\tf\ty\ti\thigh\ts1\ts2\n", "stsb:dev", ":1:"),
    "STS score NaN": data_case(hostile.STSB_DEV, b"g\tf\ty\ti\tnan\ts1\ts2\n", "stsb:dev", ":1:", "finite"),
    "STS gold 500": gold_score("500"),
    "STS gold -3": gold_score("-3"),
    "STS invalid UTF-8": data_case(hostile.STSB_DEV, b"g\tf\ty\ti\t1\ts\xff1\ts2\n", "stsb:dev", ":1:", "UTF-8"),
    "STS single pair of NUL": data_case(hostile.STSB_DEV, b"\x00\x00\x00\n", "stsb:dev", ":1:"),
    "STS unreadable": NeedsPermissions(unreadable_data),
    "SICK header only": data_case(
        hostile.SICK_DEV,
        b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n",
        "sickr:dev",
        "no example",
    ),
    "SICK empty": data_case(hostile.SICK_DEV, b"", "sickr:dev", "no example"),
    "SICK without header": data_case(hostile.SICK_DEV, b"1\ta\tb\t3.0\tNEUTRAL\n", "sickr:dev", ":1:", "header"),
    "SICK score 0.5": sick_score,
    "STS12 empty subset": data_case(f"{hostile.STS12}/STS.input.MSRpar.txt", b"", "sts12", "empty"),
    "STS12 all gold blank": sts12_gold(b"\n" * 20, "all 20 gold lines are blank"),
    "STS12 gold line count differs": sts12_gold(b"1.0\n2.0\n", "has 2 lines"),
    "STS12 gold 7": sts12_gold(b"7\n" * 20, ":1:", "outside the range 0-5"),
    "STS12 gold missing": data_case(
        f"{hostile.STS12}/STS.gs.MSRvid.txt", None, "sts12", remove=(f"{hostile.STS12}/STS.gs.MSRvid.txt",)
    ),
    "SST-2 train header only": data_case(hostile.SST2_TRAIN, b"sentence\tlabel\n", "sst2", "no example"),
    "SST-2 train one class": one_class_sst2,
    "SST-2 train label 7": data_case(hostile.SST2_TRAIN, b"sentence\tlabel\na text\t7\n", "sst2", ":2:", "label"),
    "SST-2 dev header only": data_case(hostile.SST2_DEV, b"sentence\tlabel\n", "sst2", "no example"),
    "json is a folder": json_case(lambda tmp: tmp, "is a folder"),
    "json under a file": json_case(lambda tmp: file_in_the_way(tmp) / "r.json", "is a file"),
    "json in a read-only folder": NeedsPermissions(
        json_case(lambda tmp: read_only_folder(tmp) / "r.json", "cannot write")
    ),
}


# ----------------------------------------------------------------------------------------------- plot cases


def log_case(content: bytes | None, *expected: str, out: Callable[[Path], Path] | None = None):
    def build(env: Env, tmp: Path):
        run_dir = tmp / "run"
        run_dir.mkdir()
        if content is not None:
            (run_dir / "train_log.jsonl").write_bytes(content)
        argv = ["plot", str(run_dir)] + (["--out", str(out(tmp))] if out else [])
        return argv, list(expected)

    return build


GOOD_LOG = b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n'

PLOT_CASES: dict[str, Callable] = {
    "run folder missing": lambda env, tmp: (["plot", str(tmp / "norun")], ["norun", "no training log"]),
    "log missing": log_case(None, "no training log"),
    "log empty": log_case(b"", "no numeric series"),
    "log bad middle line": log_case(b'{"step": 1}\nnot json\n{"step": 3}\n', "train_log.jsonl:2", "not valid JSON"),
    "log array line": log_case(b'{"step": 1}\n[1, 2]\n', "train_log.jsonl:2", "JSON object"),
    "log invalid UTF-8": log_case(b'{"step": 1}\n{"loss": "\xff"}\n{"step": 2}\n', "train_log.jsonl:2", "UTF-8"),
    "plot out is a file": log_case(GOOD_LOG, "--out", "is a file", out=file_in_the_way),
    "plot out under a file": log_case(GOOD_LOG, "--out", "is a file", out=lambda tmp: file_in_the_way(tmp) / "p"),
    "plot unknown option": lambda env, tmp: (["plot", str(tmp), "--fast"], ["--fast"]),
}

CASES = {**MODEL_CASES, **ENCODE_CASES, **EVAL_CASES, **PLOT_CASES}


def _params():
    for name, case in CASES.items():
        needs_permissions = isinstance(case, NeedsPermissions)
        skip = pytest.mark.skipif(needs_permissions and IS_ROOT, reason="root ignores file permissions")
        yield pytest.param(case, id=name, marks=skip)


def invoke(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run ``main(argv)`` in-process; any exception other than SystemExit propagates (a traceback: a failure)."""
    capsys.readouterr()  # drop what building the case printed
    try:
        main(argv)
        code = 0
    except SystemExit as exit_info:
        code = 0 if exit_info.code is None else exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error_line(code: int, stdout: str, stderr: str, expected: list[str]) -> str:
    assert "Traceback" not in stdout + stderr, stderr
    assert code == 2, f"exit {code}; stderr: {stderr}"
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for fragment in expected:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


@pytest.mark.parametrize("case", list(_params()))
def test_hostile_input_is_one_error_line(case, env, tmp_path, capsys):
    argv, expected = case(env, tmp_path)
    assert_one_error_line(*invoke(argv, capsys), expected)
    assert not (tmp_path / "ran").exists() and not (tmp_path / "pwned").exists()  # no code from the input ran
    assert not (tmp_path / "out.npy").exists()  # nothing written on failure


@pytest.mark.parametrize(
    "name", ["batch size 0", "input is a folder", "model.safetensors truncated", "STS gold 500", "log bad middle line"]
)
def test_real_process_prints_one_error_line(name, env, tmp_path):
    """The console script itself, stdin closed: no usage box, no traceback, no prompt."""
    argv, expected = CASES[name](env, tmp_path)
    done = hostile.run_cli(argv)
    assert_one_error_line(done.returncode, done.stdout, done.stderr, expected)


def test_the_matrix_is_large():
    """Keeps the count in docs/RELIABILITY.md honest: every case above is one parametrised test."""
    assert len(CASES) >= 80
