"""An experiment as data: the spec ``experiments/specs/<name>.yaml`` (issue 25, item 1), read and checked here.

A spec declares what a script used to spell out in Python: the recipe runs, their sizes, the grid, the
comparisons and the primary, the cost-model inputs, the plots and the page's template. ``experiments/run.py`` is
the one runner of every spec; a paper's irreducible analysis (SCL's λ rule, CAPT's staged pre-training, …) is a
hook module ``experiments/hooks/<name>.py`` whose functions the spec names.

Templates: every string a spec renders (a setting's name, its ``set`` overrides, its recipe, a cost expression)
is a Jinja2 template or expression over the sizes, the grid values of the setting and ``seed``. An override
that renders to an empty string is dropped, so ``{% if eval_limit is not none %}eval.limit={{ eval_limit }}{%
endif %}`` adds a key only when its size is given. A comparison's fields are templates over its own grid, which may
carry the metric (``metric: "{{ metric }}"``). A setting's ``implied`` overrides are what records made before an
option existed meant (its default then): every run gets them, and a record lacking exactly them still matches.
The specs beside this file are the examples; experiments/README.md describes the fields.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Literal

import jinja2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

SPECS_DIR = Path(__file__).resolve().parent / "specs"
TEMPLATES = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


class SpecError(ValueError):
    """A spec that cannot be used: the message is one ``error:`` line naming the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Size(_Strict):
    """One size of the experiment: a command-line flag ``--<name with dashes>``, recorded in every run."""

    default: Any = None
    type: Literal["int", "float", "str", "ints", "floats"] | None = None
    help: str = ""

    def kind(self) -> str:
        """The declared type, else the default's (a size whose default is None must declare it)."""
        if self.type:
            return self.type
        value = self.default
        if isinstance(value, bool) or value is None:
            return "str"
        if isinstance(value, list):
            return "floats" if any(isinstance(v, float) for v in value) else "ints"
        return {int: "int", float: "float"}.get(type(value), "str")


class Setting(_Strict):
    """A family of runs: one per grid point (its ``name`` rendered) and seed."""

    name: str
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    recipe: str
    seeds: list[int] | str | None = None  # None: the experiment's --seeds; a name: that size's seeds (ints)
    stands_for_every_seed: bool = False  # a deterministic run (an evaluation): its one value pairs with every seed
    run: str = "train"  # "train" (a recipe run) or the name of a hook function run(context) -> metrics
    set: list[str] = Field(default_factory=list)
    # Overrides that records lacking them imply (made before the option existed, when its default was this value):
    # added to every run's overrides, and a record whose overrides lack exactly these still matches the plan.
    implied: list[str] = Field(default_factory=list)
    cost: str  # reference seconds on 2 quiet cores: an expression over the sizes and experiments/cost.py's names
    check: Literal["last_selected"] | None = None  # "last_selected": the selected step must be the last
    metrics_hook: str | None = None  # a hook function (run, summary, args) -> extra metrics of a recipe run

    def points(self) -> list[dict[str, Any]]:
        """Every grid point, as ``{variable: value}``, in the order the grid lists them."""
        keys = list(self.grid)
        return [dict(zip(keys, values, strict=True)) for values in itertools.product(*self.grid.values())]


class FloorSpec(_Strict):
    """One floor check of a comparison: the mean of ``metric`` (default: the comparison's) of ``setting`` (a
    template over the grid point and ``arm``, the treatment's or the baseline's name) against ``task``'s floor; a
    check whose task renders empty is left out (e.g. a part's floor checked on the rows of an averaged metric)."""

    task: str
    metric: str | None = None
    setting: str = "{{ arm }}"


class ComparisonSpec(_Strict):
    """Treatment − baseline on one metric, paired by seed, for every point of ``grid``: every field but ``grid``
    is a template over the point (``metric: "{{ metric }}"`` with ``metric`` in the grid: one row per metric)."""

    treatment: str
    baseline: str
    metric: str
    direction: Literal[1, -1] | str = 1
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    margin: float | str | None = None  # a "similar" claim: TOST at this margin ("": none)
    floor_task: str | None = None  # check both arms against this task's floor (experiments/floors.yaml); "": none
    floors: list[FloorSpec] = Field(default_factory=list)  # further checks: other metrics or settings than the arms
    # the records' item set (``items`` key, e.g. sst2_test) whose per-item correctness ×100 averages to ``metric``:
    # a two-level bootstrap (seeds × items) is given beside the t-interval (issue 25: test sets under 1,000 rows)
    items: str | None = None
    note: str = ""  # a caveat shown beside the row (e.g. what its seeds measure)

    def at(self, point: dict[str, Any]) -> ComparisonSpec:
        """The comparison at one grid point: its templates rendered, each floor check named per arm."""
        treatment, baseline = render(self.treatment, point), render(self.baseline, point)
        metric, direction = render(self.metric, point), int(render(str(self.direction), point))
        if direction not in (1, -1):
            raise ValueError(f"direction {direction} at {point} is neither 1 nor -1")
        floors = [FloorSpec(task=task, metric=render(check.metric or metric, point),
                            setting=render(check.setting, {**point, "arm": arm}))
                  for check in self.floors if (task := render(check.task, point).strip())
                  for arm in (treatment, baseline)]
        return self.model_copy(update={
            "treatment": treatment, "baseline": baseline, "metric": metric, "floors": floors,
            "direction": direction, "margin": _number(render(str(self.margin), point)) if self.margin else None,
            "floor_task": render(self.floor_task, point).strip() or None if self.floor_task else None,
            "items": render(self.items, point).strip() or None if self.items else None})


class FloorCheck(_Strict):
    """Each arm's mean of ``metric`` against ``task``'s floor (experiments/floors.yaml)."""

    metric: str
    task: str


class Primary(_Strict):
    """The paper's one primary comparison (issue 25, item 2): it alone carries a verdict, Holm-corrected over the
    seven papers' primaries (experiments/verdicts.py)."""

    claim: str
    treatment: str
    baseline: str
    metric: str
    direction: Literal[1, -1]
    test: Literal["paired-t+permutation", "tost"] = "paired-t+permutation"
    margin: float | None = None  # the equivalence margin of a tost primary, in the metric's units
    floors: list[FloorCheck] = Field(default_factory=list)
    unit: dict[str, str] | None = None  # where the unit is not the paired seed: the settings whose runs are units
    reason: str

    @model_validator(mode="after")
    def _margin(self):
        if self.test == "tost" and not self.margin:
            raise ValueError("margin is needed by test: tost")
        return self


class Plot(_Strict):
    """A figure of the page, drawn by ``experiments/plots.py`` (``kind``: dots per setting with the seeds; curves
    of a metric against a numeric group or against the training steps of a record's curves; or the paired
    differences of the comparisons with a zero line)."""

    kind: Literal["dots", "curves", "paired_delta"]
    file: str
    title: str
    metrics: dict[str, str] = Field(default_factory=dict)  # metrics key -> panel title
    groups: list[str] = Field(default_factory=list)  # dots, curves: x groups (a grid variable's values)
    series: dict[str, str] = Field(default_factory=dict)  # setting template (over the group) -> legend
    # metrics key -> the task's majority rate (a line), or {group: rate} (one line per group)
    majority: dict[str, float | dict[str, float]] = Field(default_factory=dict)
    comparisons: list[str] = Field(default_factory=list)  # paired_delta: "treatment − baseline" patterns drawn (all)
    steps_of: str | None = None  # curves: the metrics key of a record's curves ({"steps": [...], key: [...]})
    xlabel: str = ""
    ylabel: str = ""
    xscale: Literal["linear", "log"] = "linear"
    yscale: Literal["linear", "log"] = "linear"


class Spec(_Strict):
    """One experiment (see the module docstring)."""

    name: str
    paper: str
    claim: str
    hook: str | None = None
    prepare: str | None = None  # a hook function (args) -> args, called once before the runs (e.g. data)
    values_hook: str | None = None  # a hook function (spec, store, values) -> values: derived settings
    description: str
    seeds: list[int]
    data: list[str] = Field(default_factory=list)  # the data-root files / folders its runs read (hashed per record)
    sizes: dict[str, Size] = Field(default_factory=dict)
    settings: list[Setting]
    metrics: list[str]  # the metrics a recipe run keeps (from its final evaluation)
    derived: dict[str, list[str]] = Field(default_factory=dict)  # key -> the metrics it is the mean of
    comparisons: list[ComparisonSpec] = Field(default_factory=list)
    plots: list[Plot] = Field(default_factory=list)
    summary_numbers: str  # the README row's numbers: a template over the page's context
    primary: Primary | None = None  # the paper's primary comparison (the seven papers' experiments have one)

    @model_validator(mode="after")
    def _seed_sizes(self):
        """A setting's ``seeds`` given as a name must name a size of seeds."""
        for index, setting in enumerate(self.settings):
            if isinstance(setting.seeds, str) and (setting.seeds not in self.sizes
                                                   or self.sizes[setting.seeds].kind() != "ints"):
                raise ValueError(f"settings.{index}.seeds: {setting.seeds!r} is not a size of type ints")
        return self

    @model_validator(mode="after")
    def _comparisons(self):
        """Every comparison renders at every point of its grid."""
        for index, declared in enumerate(self.comparisons):
            for point in Setting(name="", recipe="", cost="0", grid=declared.grid).points():
                try:
                    declared.at(point)
                except (jinja2.TemplateError, ValueError) as error:
                    raise ValueError(f"comparisons.{index}: {error}") from None
        return self

    @field_validator("sizes", mode="before")
    @classmethod
    def _sizes(cls, value):
        """``size: 3`` is short for ``size: {default: 3}``."""
        return {k: v if isinstance(v, dict) else {"default": v} for k, v in (value or {}).items()}


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


def render(template: str, context: dict[str, Any]) -> str:
    """``template`` rendered over ``context`` (an unknown name is an error)."""
    return TEMPLATES.from_string(template).render(**context)


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """The value of a Jinja2 expression over ``context``."""
    return TEMPLATES.compile_expression(expression, undefined_to_none=False)(**context)


def load_spec(name_or_path: str | Path) -> Spec:
    """The spec of ``experiments/specs/<name>.yaml`` (or of a path), checked: a :class:`SpecError` names the
    file and the key of the first problem."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = SPECS_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in SPECS_DIR.glob("*.yaml")))
        raise SpecError(f"error: no experiment spec {path} (known: {known})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SpecError(f"error: {where}: not valid YAML ({getattr(error, 'problem', error)})") from None
    try:
        spec = Spec.model_validate(data or {})
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise SpecError(f"error: {path}: {key}: {first['msg']}") from None
    if spec.name != path.stem:
        raise SpecError(f"error: {path}: name: {spec.name!r} is not the file's name {path.stem!r}")
    return spec


def template_path(spec: Spec) -> Path:
    """The page's markdown template beside the spec."""
    return SPECS_DIR / f"{spec.name}.md"
