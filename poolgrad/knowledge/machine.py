"""The machine a result ran on, as findings scope on it: the CPU's features and what each
framework's environment decides of its kernels."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Machine:
    """What decides ISA-dependent behaviour: the CPU's features and, per framework, what its
    environment decides of its kernels (poolgrad/adapters/framework.py, Dispatch): the CPU
    features they may use, and named facts."""
    cpu_features: frozenset[str] = frozenset()
    # (framework, its kernel features, its facts as (name, value) pairs), for the frameworks known
    frameworks: frozenset[tuple[str, frozenset[str], frozenset[tuple[str, bool | str]]]] = frozenset()

    def kernel_features(self, framework: str) -> frozenset[str]:
        return next((k for name, k, _ in self.frameworks if name == framework), self.cpu_features)

    def facts(self, framework: str) -> dict:
        return next((dict(f) for name, _, f in self.frameworks if name == framework), {})

    @classmethod
    def of(cls, cpu_features, environments: dict[str, dict]) -> "Machine":
        """A CPU of ``cpu_features``, with the frameworks of ``environments`` (by framework: its
        environment, Framework.dispatch_environment)."""
        from poolgrad.adapters import registry  # the registry reads entry points: only when asked

        cpu_features, frameworks = frozenset(cpu_features), []
        for name, environment in environments.items():
            dispatch = registry.declared(name).dispatch
            frameworks.append((name, dispatch.kernel_features(cpu_features, environment),
                               frozenset(dispatch.machine_facts(environment).items())))
        return cls(cpu_features, frozenset(frameworks))

    @classmethod
    def from_environment(cls, env: dict) -> "Machine":
        """From a results environment record (what the run recorded of the machine)."""
        from poolgrad.adapters import registry

        return cls.of(env.get("cpu_features") or (),
                      {name: registry.declared(name).environment_in(env) for name in env.get("frameworks") or {}})
