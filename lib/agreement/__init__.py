"""Which score agrees with people: every text metric and judge of a task held against human labels
(:mod:`lib.agreement.scorers`, ``python -m lib.agreement``) with the agreement statistics
(:mod:`lib.metrics.rater_agreement`)."""
