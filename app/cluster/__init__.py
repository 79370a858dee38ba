"""Past one machine: capture points keep small mergeable summaries, one collector merges them and
releases once (Dask distributed moves the tasks and the summaries; kernels stay numba).

* ``dptop.cluster.archive.replay_archive`` — capture files as capture points (archive replay);
* ``dptop.cluster.live`` — ``dptop agent`` (a live capture point as a Dask task pinned to its host)
  and the ``Collector`` that merges live agents;
* ``dptop.cluster.cli`` — the ``agent``, ``collect`` and ``cluster-bench`` subcommands.
"""
