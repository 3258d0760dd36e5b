"""A training run's provenance.json: beside the resolved config.yaml, one session per train(), ended with the
process's CPU and wall time."""

from __future__ import annotations

import yaml

from contrastext.training.config import TrainConfig
from contrastext.training.run_record import RECORD_NAME, read_record
from contrastext.training.trainer import Trainer
from tests.training._tiny_training import build, make_config, sentences


def test_a_run_records_its_resolved_config_and_provenance_and_a_resume_adds_a_session(tmp_path, minilm_path,
                                                                                    one_thread):
    data = tmp_path / "pairs.csv"
    data.write_text("a,b\nx,y\n")
    config = make_config(tmp_path / "run", max_steps=2, save_every=2)
    config.data.path = str(data)
    Trainer(build(minilm_path), sentences(), config, method_args={"temperature": 0.05, "k": 3}).train()

    folder = tmp_path / "run"
    resolved = yaml.safe_load((folder / "config.yaml").read_text())
    assert TrainConfig.model_validate(resolved).train.max_steps == 2  # every key, a loadable config
    assert resolved["train"]["lr"] == 1e-3 and "warmup_ratio" in resolved["train"]  # defaults included
    record = read_record(folder)
    assert record["config_file"] == "config.yaml" and record["method_args"] == {"temperature": 0.05, "k": 3}
    (session,) = record["sessions"]
    start = session["provenance"]
    assert start["versions"]["torch"] and start["torch_threads"] >= 1 and "git_dirty" in start
    assert start["data"]["data.path"]["fingerprint"]["sha256"]  # the fingerprint the run took, not hashed again
    end = session["end"]
    assert session["start_step"] == 0 and end["step"] == 2 and end["preempted"] is False
    assert end["cpu_time_s"] >= start["cpu_time_s"] and end["wall_time_s"] >= start["wall_time_s"]
    assert end["session_cpu_s"] > 0 and end["session_wall_s"] > 0

    Trainer(build(minilm_path), sentences(), config).train(resume=True)  # finished already: a second session
    sessions = read_record(folder)["sessions"]
    assert len(sessions) == 2 and sessions[1]["start_step"] == 2 and sessions[1]["end"]["step"] == 2
    assert (folder / RECORD_NAME).is_file()
