"""What every layer shares: the records (:mod:`lib.core.schema`), reading answers from model text
(:mod:`lib.core.answers`), where things live (:mod:`lib.core.paths`), the processes of a job
(:mod:`lib.core.ranks`) and the papers' stated numbers (:mod:`lib.core.papers`)."""
