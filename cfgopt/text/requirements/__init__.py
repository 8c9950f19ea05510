r"""Requirements and versions as pip reads them: the one reader of every file and string that states a package.

Every consumer reads through here, so they agree on what a file states: the repository's pins
(`cfgopt.environment.pins`), the job's environment (`cfgopt.environment.stated`), the linted requirement files
(`cfgopt.loaders.requirement_files`), the version ranges (`cfgopt.knowledge.versions`) and `cfgopt doctor`.

- names: `normalise` (PEP 503, with `_`: `Liger-Kernel` == `liger_kernel`), `installed_distribution` (a
  `.dist-info` folder's name and version);
- requirements: one PEP 508 string (`parse_requirement`: `name[extras] spec ; marker` or `name @ url`, with its
  spans; `pep508_requirement`: only what packaging parses); requirements files as pip 23.2.1 reads them
  (`decode_requirements` / `read_requirements`: the bytes decoded as pip decodes them, a byte order mark or a
  coding comment, else UTF-8; `logical_lines`: `\` continuations; `requirement_lines`: `-r` includes;
  `requirement_of`: comments and per-requirement options such as `--hash` cut; `line_pins`;
  `requirements_txt_pins` with spans in the file; `refused_requirement`: the first line every pip stops on, with
  `legacy_operators`, how pip before 24.1 reads a requirement packaging 22+ refuses);
  pyproject.toml (the `[project] dependencies` array on one line or several, `project_dependencies`; poetry's
  `[tool.poetry.dependencies]`, `poetry_dependencies`; every quoted requirement, `string_pins`; poetry's
  `name = "spec"` lines anywhere, `poetry_pins`); setup.py (`string_pins`); setup.cfg (`install_requires` and
  `extras_require`, `setup_cfg_pins`); a conda environment.yml (conda match specs read as PEP 440, `conda_pin`,
  and the `- pip:` list: `conda_environment_pins`, `conda_environment_requirements`); uv.lock / poetry.lock
  (`lock_pins`); a LLaMA-Factory source tree's `VERSION` (`source_version`); every pin of a file as the
  requirement rules lint it (`requirement_pins`);
- versions: `version_key` (numeric order), `pip_version` (PEP 440's parts), `parse_spec` / `clause_admits` /
  `spec_admits` (PEP 440, and poetry's `^` / `~`), `reaches` (a lower bound at or above a release),
  `exact_version`, `final_release` / `numeric_spec` (what ENV005 compares exactly), `platform_of_build`
  (`+cu121`, `+rocm6.2`).

tests/repository/test_closed_classes.py fails on a pattern elsewhere in cfgopt/ that reads a requirement or a version.

A small parser of its own, not `packaging`: importing `packaging.requirements` made `cfgopt lint` of one config
about 10% slower, `packaging.version` with `packaging.specifiers` about 3% (paired runs, bench/results.md), and
poetry's `^` / `~` are no PEP 440. TOML is read as text, not parsed: parsing would load tomllib on every lint run
in a repository that pins DeepSpeed (tests/rules/test_signal_over_noise.py compares the two readings); setup.cfg
and environment.yml are read as text too, as configparser and conda read their lists (no YAML parse of them).
Nothing here reads a file but `read_requirements` (through `user_files.read_bounded`; `-r` includes go through the
caller's `read`). Every pattern is compiled at first use (`lazy`), and no two quantifiers in one can match the
same characters one after the other (`\s*(...)?\s*` would): a 3 KB line takes milliseconds, not minutes.
"""
