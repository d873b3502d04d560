"""The knowledge base: what each framework path does where it departs from the spec.

Each framework package's ``findings.toml`` (``poolgrad/adapters/<framework>/``, a plugin's beside its
planner) holds one curated entry per behaviour of a framework path, written for the people who
maintain the kernel: what it does, why (the kernel source), the upstream report or "no upstream
report". Its scope names the target (framework, variants, devices), the ops and dtypes (globs),
the machine that decides it (CPU features, and the features the framework's kernels may use and
the facts its environment declares: machine.Machine), and the *properties of the case* that
trigger it (poolgrad/reference/properties.py), so a user's case is judged like the catalogue's.
Its claim is a partial policy for the forward and/or the gradient (checked by re-running the
reference under it), or a verdict (an error by type and message pattern). The releases a finding
holds for come from the release lanes' history (each framework's history.json beside its
findings, see history.py), never from the entry itself.

Judging one (case, target) result (judge.judge): the findings in scope compose (their partial
policies merge), so a case with NaNs *and* subnormals is explained by the two findings together;
a divergence that the findings in scope explain is ``expected``; one that they do not explain is
``behaviour_changed``; one with no finding in scope is ``fail``. A conforming result never fails;
a finding in scope that predicted a divergence there is reported as contradicted (the release
fixed it, or its scope is too wide).

One job a module:

- impacts.py: what a behaviour means for training, ranked.
- finding.py: the finding (its scope and claim) and its typed upstream references.
- scope.py: matching a scope's globs, feature requirements and version ranges.
- schema.py: a findings file's ``[[finding]]`` table read into a Finding, with clear errors.
- machine.py: the CPU and the frameworks' kernel environments a scope can name.
- history.py: the release lanes' history, and the version ranges it gives.
- sources.py: the findings files and histories of the installed framework packages, loaded.
- base.py: the loaded findings, looked up per target.
- judge.py: which claims explain a result, and which takes the credit.
"""
