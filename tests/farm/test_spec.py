"""Specs and presets: validation names field and line; presets cover what they promise."""

import pytest

from farm.metrics import NOMINAL_GPU, operand_bytes
from farm.plan import expand, make_batches
from farm.spec import SpecError, load_spec, parse_spec, preset_names


def test_every_problem_is_reported_with_its_line():
    text = """\
name: x
dtypes: [bfloat16, int8]
variants: [tiled]
shapes:
  - {m: 10, n: 10, k: 10}
  - m: [1, -3]
    n: 10
    k: 0
    q: 4
configs:
  block_m: [24]
  colour: [red]
timing: {target_ci: 2}
"""
    with pytest.raises(SpecError) as err:
        parse_spec(text, "my.yaml")
    assert str(err.value).splitlines()[1:] == [
        "  my.yaml:2: dtypes[1]: Input should be 'float16', 'bfloat16' or 'float32'",
        "  my.yaml:6: shapes[1].m[1]: Input should be greater than 0",
        "  my.yaml:8: shapes[1].k[0]: Input should be greater than 0",
        "  my.yaml:9: shapes[1].q: Extra inputs are not permitted",
        "  my.yaml:11: configs.block_m[0]: Value error, 24 is not a power of two",
        "  my.yaml:12: configs.colour: Extra inputs are not permitted",
        "  my.yaml:13: timing.target_ci: Input should be less than 1",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("- just a list", "a spec is a YAML mapping", id="not-a-mapping"),
        pytest.param(
            "name: x\nvariants: [tiled\n",
            r"^s\.yaml:3:1: not valid YAML: expected ',' or '\]', but got '<stream end>' "
            r"\(while parsing a flow sequence at line 2, column 11\)$",
            id="bad-yaml",
        ),
        pytest.param(
            "name: x\n\tdtypes: [bfloat16]", r"^s\.yaml:2:1: not valid YAML: found character '\\t'", id="tab"
        ),
        pytest.param(
            "name: x\ndtypes: []\nvariants: [tiled]\nshapes: [{m: 1, n: 1, k: 1}]",
            "dtypes: List should have at least 1 item",
            id="empty-dtypes",
        ),
    ],
)
def test_malformed_specs(text, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(text, "s.yaml")


@pytest.mark.parametrize("name", ["smoke", "splitk", "grouping", "llm", "full"])
def test_presets_load_and_expand(name):
    spec = load_spec(preset=name)
    points, _ = expand(spec)
    assert points
    batches = make_batches(points, spec.seed)
    assert sum(len(b.points) for b in batches) == len(points)
    assert all(len({(p.dtype, p.shape) for p in b.points}) == 1 for b in batches)  # one shape per batch


def test_splitk_preset_spans_005_to_4_tiles_per_sm():
    shapes = load_spec(preset="splitk").shape_list()
    per_sm = [-(-m // 128) * -(-n // 128) / NOMINAL_GPU.sm_count for m, n, _ in shapes]
    assert min(per_sm) == pytest.approx(0.045, abs=0.001) and max(per_sm) == pytest.approx(4.0)


def test_grouping_preset_spans_inside_to_several_times_l2():
    shapes = load_spec(preset="grouping").shape_list()
    ratios = [operand_bytes(m, n, k, "bfloat16") / (60 * 2**20) for m, n, k in shapes]
    assert min(ratios) < 0.5 and max(ratios) > 6


def test_preset_names():
    assert preset_names() == ["full", "grouping", "llm", "smoke", "splitk"]
