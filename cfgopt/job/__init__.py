"""One training job: the settings it is judged with, its values with the release's defaults, hardware,
environment, data, launch line, and the one loader (`job.loader.load_job`)."""
