"""Past one machine: capture points keep small mergeable summaries, one collector merges them and
releases once (Dask distributed moves the tasks and the summaries; kernels stay numba).

* ``dptop.cluster.archive.replay_archive`` — capture files as capture points (archive replay);
* ``dptop.cluster.live`` — ``dptop agent`` (a live capture point on a Dask worker of its host, pulled
  by the collector) and ``dptop.cluster.collector``'s ``Collector`` that merges live agents;
* ``dptop.cluster.messages`` — what agents and archive tasks send the collector, as msgpack bytes;
* ``dptop.cluster.cli`` — the ``agent`` and ``collect`` subcommands (``cluster-bench`` is the lab's).
"""
