"""Assemble docs/RESULTS.md from the experiments' sections and write the summary table into the README.

Each spec's page ``docs/results/<name>.md`` and summary row (experiments/run.py ``summary``) come from its
records; this script reads them all (no training), renders docs/RESULTS.md from ``experiments/pages/results.md``
(the introduction, experiments/verdicts.py's section, the summary table, the provenance table, then each section)
and replaces the block between ``<!-- begin results summary -->`` / ``<!-- end results summary -->`` in README.md
with the same table.

    python experiments/results_page.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import run  # noqa: E402
import spec as specs  # noqa: E402
import verdicts  # noqa: E402

# In the order of the issue, each a spec experiments/specs/<name>.yaml.
EXPERIMENTS = ("scl_few_shot", "scl_noise", "reclaim", "capt", "gd_losses", "multitask", "simcse", "retrieval")
BEGIN = "<!-- begin results summary -->"
END = "<!-- end results summary -->"

PAGE = Path(__file__).resolve().parent / "pages" / "results.md"


def summary_rows(results_dir: Path) -> list[list[str]]:
    rows = []
    for name in EXPERIMENTS:
        if not (results_dir / f"{name}.json").exists():
            rows.append([name, "–", "–", "not run yet", "–"])
            continue
        line = run.summary(specs.load_spec(name), harness.RecordStore(name, results_dir))
        link = f"[{name}](docs/RESULTS.md#{anchor(results_dir, name)})"
        rows.append([link, line["paper"], line["claim"], line["verdict"], line["numbers"]])
    return rows


def anchor(results_dir: Path, name: str) -> str:
    """GitHub's anchor of the section's first heading."""
    path = results_dir / f"{name}.md"
    heading = next((line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("## ")), name)
    text = heading.lstrip("#").strip().lower()
    kept = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def summary_table(results_dir: Path) -> str:
    return harness.markdown_table(["experiment", "paper", "claim", "verdict", "our numbers"], summary_rows(results_dir))


def provenance_table(results_dir: Path) -> str:
    """Issue 25 item 9 in the page's header: per experiment, how many of its records carry a provenance
    (:mod:`contrastext.runtime.provenance`: commit, dirty flag, versions, threads, CPU) and the distinct ones."""
    rows = []
    for name in EXPERIMENTS:
        if not (results_dir / f"{name}.json").exists():
            continue
        records = harness.RecordStore(name, results_dir).records
        found = [r["provenance"] for r in records if isinstance(r.get("provenance"), dict)]
        lines = sorted({harness.provenance_line(record) if "git_commit" in record
                        else f"git {str(record.get('commit'))[:12]} (an earlier, shorter format)" for record in found})
        configs = sum(isinstance(record.get("config"), dict) for record in found)
        hashed = sum(bool(record.get("data")) for record in found)
        rows.append([name, str(len(records)), str(len(found)), str(configs), str(hashed),
                     "<br>".join(lines) if lines else "none: made before the records carried one"])
    return harness.markdown_table(["experiment", "runs", "with provenance", "with resolved config",
                                   "with data SHA-256", "code, versions, threads, CPU"], rows)


def results_page(results_dir: Path) -> str:
    """experiments/pages/results.md over the verdicts' section, the summary, the provenance table and each
    experiment's section (its plot links pointed into results/; "not run yet" where it has none)."""
    sections = []
    for name in EXPERIMENTS:
        section = results_dir / f"{name}.md"
        if section.exists():
            text = section.read_text(encoding="utf-8")  # its plots (<name>.png, <name>-*.png) sit in results/
            sections.append(re.sub(rf"\]\(({re.escape(name)}(-[\w-]+)?\.png)\)", r"](results/\1)", text))
        else:
            sections.append(f"## {name}\n\nNot run yet: `python experiments/run.py {name} --data-root ../shared/data`.")
        earlier = sorted(results_dir.glob(f"{name}-*.md"))
        if earlier:
            links = ", ".join(f"[{path.stem}](results/{path.name})" for path in earlier)
            sections.append(f"Earlier sittings under a superseded protocol (records kept, not evidence): {links}.")
    return specs.render(PAGE.read_text(encoding="utf-8"), {
        "provenance_table": provenance_table(results_dir), "verdicts": verdicts.section(results_dir).rstrip() + "\n",
        "summary_table": summary_table(results_dir).replace("docs/RESULTS.md#", "#"),
        "sections": "\n\n".join(part.rstrip() for part in sections)})


def write_readme_block(readme: Path, table: str) -> None:
    text = readme.read_text(encoding="utf-8")
    block = f"{BEGIN}\n{table}{END}"
    if BEGIN in text and END in text:
        start, end = text.index(BEGIN), text.index(END) + len(END)
        text = text[:start] + block + text[end:]
    else:
        text = text.rstrip() + "\n\n## Results\n\n" + block + "\n"
    readme.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = harness.argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(harness.RESULTS_DIR))
    parser.add_argument("--page", default=str(harness.REPO / "docs" / "RESULTS.md"))
    parser.add_argument("--readme", default=str(harness.REPO / "README.md"))
    args = parser.parse_args(argv)
    results = Path(args.results)
    Path(args.page).write_text(results_page(results), encoding="utf-8")
    write_readme_block(Path(args.readme), summary_table(results))
    print(f"wrote {args.page} and the summary block of {args.readme}")


if __name__ == "__main__":
    main()
