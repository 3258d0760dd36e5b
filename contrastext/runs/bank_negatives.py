"""The ``negatives:`` section of a run: online hard negatives from a kept bank, for ``mnrl`` and ``simcse-sup``.

:func:`check_bank_negatives` refuses, before the model loads, what cannot take bank negatives (each a ConfigError
naming the key): an objective other than InfoNCE or a Matryoshka one (``negatives.source``), a search name that is
not registered (``negatives.search``), ``negatives.search_nlist`` / ``search_nprobe`` for a search that takes no
such argument (only ``ivf`` has inverted lists), a ``k`` not below the bank's rows (``negatives.k``), a corpus that is
not a readable ``.txt`` file (``negatives.corpus``). :func:`with_bank_negatives` turns the training examples into
``IndexedExample`` rows (the bank is addressed by row) and builds the
:class:`~contrastext.negatives.online.OnlineNegatives` over their texts after the anchor, the corpus after them.
Which recipes take the section at all is ``RunSpec.takes_negatives`` (:mod:`contrastext.runs.registry`).
"""

from __future__ import annotations

from pathlib import Path

from contrastext.data.examples import Example, IndexedExample
from contrastext.errors import ConfigError
from contrastext.negatives.online import BankLayout, OnlineNegatives, bank_layout
from contrastext.negatives.search import SEARCHES, make_search
from contrastext.objectives.infonce import InfoNCE
from contrastext.runtime.processes import is_main_process
from contrastext.training.batch_sampling import key_origin
from contrastext.training.config import TrainConfig


def corpus_texts(config: TrainConfig) -> list[str]:
    """The non-empty lines of ``negatives.corpus`` (a .txt file), or none when it is unset."""
    path = config.negatives.corpus
    if path is None:
        return []
    where = key_origin(config, "negatives.corpus")
    if Path(path).suffix.lower() != ".txt":
        raise ConfigError(f"{where}: negatives.corpus={path!r}: give a .txt file, one text a line")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{where}: negatives.corpus={path!r}: cannot read it ({error})") from None
    return [line for line in text.splitlines() if line.strip()]


def check_bank_negatives(config: TrainConfig, loss_name: str, objective, examples: list[Example],
                         supervised: bool) -> BankLayout | None:  # fmt: skip
    """The bank's layout when ``negatives.source`` is ``bank`` (None otherwise), after the checks of the module."""
    settings = config.negatives
    if settings.source != "bank":
        return None
    where = key_origin(config, "negatives.source")
    if not supervised or not isinstance(objective, InfoNCE):
        kind = type(objective).__name__
        raise ConfigError(
            f"{where}: negatives.source=bank appends bank rows to the candidates of InfoNCE; method_args.loss="
            f"{loss_name} ({kind}{', Matryoshka' if kind == 'Matryoshka' else ''}) takes none: use "
            "method_args.loss=infonce without method_args.matryoshka_dims, or negatives.source=none"
        )
    SEARCHES.check(settings.search, "negatives.search", key_origin(config, "negatives.search"))
    search_arguments(config)
    layout = bank_layout([example.texts for example in examples], corpus_texts(config))
    if settings.k >= len(layout.texts):
        raise ConfigError(
            f"{key_origin(config, 'negatives.k')}: negatives.k={settings.k}: the bank holds {len(layout.texts)} "
            f"distinct texts; k must be below that"
        )
    return layout


def search_arguments(config: TrainConfig) -> dict[str, int]:
    """``negatives.search_nlist`` / ``search_nprobe`` (those set) as the search's constructor arguments; a
    ConfigError naming the key when ``negatives.search`` takes no such argument."""
    settings, accepted = config.negatives, SEARCHES.accepted_arguments(config.negatives.search)
    given = {name: value for name, value in (("nlist", settings.search_nlist), ("nprobe", settings.search_nprobe))
             if value is not None}
    for name in given:
        if name not in accepted:
            raise ConfigError(
                f"{key_origin(config, f'negatives.search_{name}')}: negatives.search_{name}: search "
                f"{settings.search!r} takes no {name} (its arguments: {', '.join(accepted) or 'none'}); it applies "
                "to search: ivf"
            )
    return given


def with_bank_negatives(config: TrainConfig, layout: BankLayout, examples: list[Example], encoder,
                        width: int) -> tuple[list[IndexedExample], OnlineNegatives]:  # fmt: skip
    """The examples as ``IndexedExample`` rows and the bank over ``layout`` (embeddings of ``width`` dims)."""
    settings = config.negatives
    indexed = [IndexedExample(example.texts, example.label, example.source, index=i)
               for i, example in enumerate(examples)]  # fmt: skip
    online = OnlineNegatives(
        layout, width, settings.k, refresh=settings.refresh, momentum=settings.momentum,
        reencode_every=settings.reencode_every, search=make_search(settings.search, **search_arguments(config)),
        absolute_margin=settings.absolute_margin, relative_margin=settings.relative_margin,
    )
    if is_main_process():
        print(f"negatives: a bank of {len(layout.texts)} texts ({online.report()['bytes_per_row']} bytes a row), "
              f"k={settings.k} per anchor, refresh {settings.refresh}, search {settings.search}", flush=True)
    return indexed, online
