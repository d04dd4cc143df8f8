"""The ``dpstream`` command: private synthetic data from files, without glue code.

::

    dpstream points --input X.csv --columns lon,lat --bounds "-122.52,-122.36,37.70,37.81" \\
        --method online --epsilon 1 --time-column date --release-every month \\
        --start 2024-01 --end 2024-12 --out synth/
    dpstream table --input adult.csv --domain adult-domain.json --batch-size 50 \\
        --epsilon 1 --out releases/ --evaluate eval/ --plot
    dpstream demo

Every option can also come from a TOML file (``--config run.toml``; keys are the
option names with ``_`` or ``-``); flags override it. Invalid options end the
run with one message naming the option (exit status 2).

Privacy: each command spends exactly ``--epsilon`` on the whole stream of
releases (``points --method online``: all releases together, the default online
synthesizer; ``--method online-paper``: He–Vershynin–Zhu's Algorithm 1;
``points --method privhp``: one release at the end; ``table``: Kumar–Strohmer–
Vershynin, every step's table), for the neighbouring relation of the command
(:data:`RELATIONS`, also in each command's ``--help``). Bounds and domains are
public inputs, never computed from the data; with ``--time-column`` the releases
are labelled by the calendar periods from ``--start`` to ``--end`` (or
``--release-at``), which must be given: the release schedule is public and never
read from the data (:mod:`dpstream.schedule`). The input is checked in full before
the first release (:mod:`dpstream.inputs`); errors, warnings and notes go to
standard error and may name rows, values and counts, release files never do.
``--seed`` makes a run reproducible and **not private**.

The release directory (``--out``) receives release files only. Evaluation against
the real data (metrics, plots, figures printed) is NOT PRIVATE: it is produced
only with ``--evaluate DIR``, in ``DIR`` (never ``--out`` or inside it), in files
named ``NOT-PRIVATE-…``. A checkpoint holds exact counts and may not sit inside
``--out`` either.

One module per command (:mod:`.points`, :mod:`.table`, :mod:`.demo`); :mod:`.entry`
holds :func:`main`, :mod:`.parser` the options and their help, :mod:`.options` their
checks and a checkpoint's fingerprint, :mod:`.batching` the public schedule,
:mod:`.report` what the curator is told, :mod:`.evaluation` and :mod:`.plots` the
NOT PRIVATE evaluation.
"""

from __future__ import annotations

from dpstream.cli.entry import main
from dpstream.cli.parser import RELATIONS

__all__ = ["RELATIONS", "main"]
