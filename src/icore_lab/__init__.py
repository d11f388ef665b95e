"""icore's lab: the paper reproductions, apart from the library (issue 26).

The lab holds what ``icore bench ...`` and ``icore demo`` run and the library never needs:
the benchmark harnesses (:mod:`icore_lab.bench`), the simulated and LLM teams of the iCORE
controlled evaluation (:mod:`icore_lab.agents`), the task workloads
(:mod:`icore_lab.workloads`), the virtual-time network and the Mahimahi link models
(:mod:`icore_lab.net`) and the lab's commands (:mod:`icore_lab.cli`). Install it with the
``lab`` extra (``pip install 'icore[lab]'``; ``icore[bench]`` is the same).

Import rule: the lab imports the library's front doors (``icore.<package>``); the library
never imports the lab. Lab layers, lowest first: net < workloads < agents < bench < cli.
"""
