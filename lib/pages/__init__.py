"""What people look at: the run's report (:mod:`lib.pages.report`), the item browser
(:mod:`lib.pages.browser`), the agreement section (:mod:`lib.pages.agreement_view`), stage 02's
annotator (:mod:`lib.pages.annotation_widget`), figures (:mod:`lib.pages.plots`) and 2-D maps of
embeddings (:mod:`lib.pages.maps`); the pages are Jinja2 templates (``lib/data/templates/``) rendered
by :mod:`lib.pages.render`."""
