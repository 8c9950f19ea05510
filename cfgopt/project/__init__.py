"""The files of one run, read and linked: each file's `Context` (what a rule sees of it), the jobs a launch line
starts, and the one loader of a job from a path (`project.loader.load_job`)."""
