"""The best-configs file (kernels/tuned.py owns it): save -> load keeps every entry, extras included;
files of another format or version fail with a message that says which."""

import json

import pytest

from kernels.config import MatmulConfig
from kernels.tuned import FORMAT, VERSION, TunedConfigs, TunedEntry

ENTRIES = [
    TunedEntry(
        "NVIDIA H200",
        "bfloat16",
        495,
        5333,
        71,
        "streamk",
        0.125,
        MatmulConfig(extras=(("num_sms", 132),)),
        3.1,
        0.02,
        0.0081,
    ),
    TunedEntry(
        "NVIDIA H200",
        "float32",
        4096,
        4096,
        512,
        "splitk",
        0.5,
        MatmulConfig(split_k=4, input_precision="tf32"),
    ),
]


def test_save_then_load_keeps_every_entry(tmp_path) -> None:
    path = tmp_path / "best.json"
    TunedConfigs(ENTRIES).save(path)
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["version"]) == (FORMAT, VERSION) == ("triton-matmul-farm/best-configs", 1)
    assert doc["entries"][0]["config"]["extras"] == {"num_sms": 132}
    assert "extras" not in doc["entries"][1]["config"]  # v1's layout when a config has none
    assert doc["entries"][0]["host_ms"] == 0.02 and "host_ms" not in doc["entries"][1]  # optional in v1
    assert doc["entries"][0]["gpu_ms"] == 0.0081 and "gpu_ms" not in doc["entries"][1]
    assert TunedConfigs.load(path).entries == ENTRIES


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param(
            {"format": FORMAT, "version": 2, "entries": []},
            "version 2; this code reads version 1",
            id="newer",
        ),
        pytest.param(
            {"format": "other", "version": 1, "entries": []}, f"not a {FORMAT} file", id="other-format"
        ),
        pytest.param([], f"not a {FORMAT} file", id="not-an-object"),
    ],
)
def test_other_files_fail_clearly(tmp_path, doc, message: str) -> None:
    path = tmp_path / "best.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message):
        TunedConfigs.load(path)
