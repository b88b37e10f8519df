"""Datasets handed to the evaluation harnesses researchers already run (:mod:`lib.export.harnesses`,
``python -m lib.export``)."""
