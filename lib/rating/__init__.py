"""People rate a run's answers in Label Studio (:mod:`lib.rating.labelstudio`,
``python -m lib.rating``); the export comes back as human labels for :mod:`lib.agreement`."""
