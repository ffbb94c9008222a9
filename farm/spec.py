"""Grid specs: a user's YAML (or a preset of the same format), validated with pydantic.

Every error names the field and, for YAML files, the line: `spec.yaml:7: shapes[1].m: ...`.
Validation happens before Ray starts or the database is touched, so a bad spec changes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    PrivateAttr,
    ValidationError,
)

from farm.errors import UserError

DType = Literal["float16", "bfloat16", "float32"]


def _pow2(value: int) -> int:
    if value & (value - 1):
        raise ValueError(f"{value} is not a power of two")
    return value


# A size field is one number or a list of them; both validate as a non-empty list.
Sizes = Annotated[
    list[PositiveInt], BeforeValidator(lambda v: v if isinstance(v, list) else [v]), Field(min_length=1)
]
Pow2List = list[Annotated[PositiveInt, AfterValidator(_pow2)]]


class SpecError(UserError):
    """A grid spec that cannot be used; the message lists every problem with its field and line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShapeProduct(_Strict):
    """A Cartesian product of sizes: each field is one size or a list of sizes."""

    m: Sizes
    n: Sizes
    k: Sizes

    def expand(self) -> Iterator[tuple[int, int, int]]:
        return itertools.product(self.m, self.n, self.k)


class ConfigAxes(_Strict):
    """Values per MatmulConfig axis. Each variant uses the axes its config space has."""

    block_m: Pow2List | None = None
    block_n: Pow2List | None = None
    block_k: Pow2List | None = None
    group_m: list[PositiveInt] | None = None
    split_k: list[PositiveInt] | None = None
    num_warps: Pow2List | None = None
    num_stages: list[PositiveInt] | None = None
    input_precision: list[Literal["ieee", "tf32", "tf32x3"]] | None = None

    def axes(self) -> dict[str, list]:
        return {name: values for name, values in self.model_dump().items() if values is not None}


class Timing(_Strict):
    """The measurement protocol's knobs (farm/timing/ says how each is used)."""

    min_reps: PositiveInt = 10
    max_reps: PositiveInt = 100
    # Stop once the 95% confidence interval of the median is within +-0.5% of it.
    target_ci: float = Field(default=0.005, gt=0, lt=1)
    max_seconds_per_point: float = Field(default=1.0, gt=0)
    nondeterminism_repeats: PositiveInt = 3
    # steady: each config in its own steady state under the power limit (do_bench's view);
    # interleaved: every config once per round (one shared power state); rest: single launches
    # after `rest_s` of idle GPU. README "What a measurement is".
    regime: Literal["steady", "interleaved", "rest"] = "steady"
    # steady: the longest a config at the power limit runs before its measured block; the default
    # (20 ms, the sub-block that finds the limit) settles nothing (docs/design.md, "No settling at
    # the power limit")
    max_settle_s: float = Field(default=0.02, gt=0)
    # steady: passes at least for a config at the power limit (each about 0.5 s on an H200)
    limit_passes: PositiveInt = 1
    rest_s: float = Field(default=1.0, ge=0)
    # Seconds of each point's own energy window (farm.energy.ENERGY_WINDOW_S says why 0.35): its
    # launches alone, back to back, for NVML's energy counter, which moves about every 100 ms; a
    # point with a reading of its own (a config at the power limit) takes none. 0: no windows,
    # and no energy for points below the power limit. README "What a measurement is".
    energy_window_s: float = Field(default=0.35, ge=0)


class GridSpec(_Strict):
    name: str = Field(min_length=1)
    dtypes: list[DType] = Field(min_length=1)
    variants: list[str] = Field(min_length=1)
    shapes: list[ShapeProduct] = Field(min_length=1)
    configs: ConfigAxes = ConfigAxes()
    seed: int = 0
    timing: Timing = Timing()
    # Where the spec came from (a file's path, "preset NAME") and its YAML tree, so that problems found
    # after validation (an unknown variant: kernels' registry, plugins loaded) name the line too.
    _source: str = PrivateAttr(default="<spec>")
    _root: Any = PrivateAttr(default=None)

    def where(self, *loc: str | int) -> str:
        """`spec.yaml:7` for the field at `loc` (e.g. "variants", 1), or the source alone."""
        line = _line_of(self._root, loc) if self._root is not None else None
        return f"{self._source}:{line}" if line else self._source

    def shape_list(self) -> list[tuple[int, int, int]]:
        seen: dict[tuple[int, int, int], None] = {}
        for product in self.shapes:
            seen.update(dict.fromkeys(product.expand()))
        return list(seen)


def _line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """The YAML line of the deepest node on the error's path that exists."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = [v for k, v in node.value if k.value == part]
            if not match:
                # an unknown key: point at the key itself
                keys = [k for k, _ in node.value if k.value == part]
                return keys[0].start_mark.line + 1 if keys else line
            node = match[0]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _field(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _yaml_problem(exc: yaml.YAMLError, source: str) -> str:
    """`spec.yaml:3:1: not valid YAML: <problem> (<context> at line L, column C)`: PyYAML's own text
    names the file "<unicode string>" and spans five lines."""
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return f"{source}: not valid YAML: {exc}"
    text = f"{source}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {exc.problem}"
    context = getattr(exc, "context_mark", None)
    if exc.context and context is not None:
        text += f" ({exc.context} at line {context.line + 1}, column {context.column + 1})"
    return text


def parse_spec(text: str, source: str = "<spec>") -> GridSpec:
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise SpecError(_yaml_problem(exc, source)) from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a spec is a YAML mapping with name, dtypes, variants, shapes, configs")
    try:
        spec = GridSpec.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = err["loc"]
            line = _line_of(root, loc)
            where = f"{source}:{line}" if line else source
            problems.append(f"{where}: {_field(loc)}: {err['msg']}")
        raise SpecError("invalid spec\n  " + "\n  ".join(dict.fromkeys(problems))) from None
    spec._source, spec._root = source, root
    return spec


def preset_names() -> list[str]:
    return sorted(
        p.name.removesuffix(".yaml")
        for p in resources.files("farm.presets").iterdir()
        if p.name.endswith(".yaml")
    )


def load_spec(*, preset: str | None = None, path: str | None = None) -> GridSpec:
    if (preset is None) == (path is None):
        raise SpecError("give exactly one of --preset NAME or --spec FILE")
    if preset is not None:
        if preset not in preset_names():
            raise SpecError(f"unknown preset {preset!r}; presets: {', '.join(preset_names())}")
        text = resources.files("farm.presets").joinpath(f"{preset}.yaml").read_text()
        return parse_spec(text, f"preset {preset}")
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError(f"cannot read spec {path}: {exc.strerror}") from None
    return parse_spec(text, path)


def spec_as_dict(spec: GridSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json")
