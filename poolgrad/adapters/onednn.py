"""oneDNN, the kernel library TensorFlow and PyTorch link for their x86 CPU kernels: what of
their environment decides which of its kernels run (a framework record's ``dispatch``,
poolgrad/adapters/framework.py). Findings scope on it with ``kernel_features`` (the CPU features
oneDNN may use) and ``machine = {onednn = true}`` (oneDNN on or off)."""

from __future__ import annotations

from .framework import Dispatch

# oneDNN reads either name; ONEDNN_ wins where both are set.
ISA_CAP_SWITCHES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
# oneDNN's ISA names (ONEDNN_MAX_CPU_ISA) and the CPU features each lets oneDNN use.
ISA_LEVELS = (
    ("SSE41", ()), ("AVX", ("avx",)), ("AVX2", ("avx2",)), ("AVX2_VNNI", ("avx_vnni",)),
    ("AVX2_VNNI_2", ("avx_vnni_int8", "avx_ne_convert")),
    ("AVX512_CORE", ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd")),
    ("AVX512_CORE_VNNI", ("avx512_vnni",)), ("AVX512_CORE_BF16", ("avx512_bf16",)),
    ("AVX512_CORE_FP16", ("avx512_fp16",)), ("AVX512_CORE_AMX", ("amx_tile", "amx_bf16", "amx_int8")),
    ("AVX512_CORE_AMX_FP16", ("amx_fp16",)),
)


def isa_features(name: str) -> frozenset[str] | None:
    """The features oneDNN may use under ONEDNN_MAX_CPU_ISA=name (None: no cap)."""
    name = name.strip().upper()
    if name in ("", "ALL", "DEFAULT"):
        return None
    levels = [lvl for lvl, _ in ISA_LEVELS]
    if name not in levels:
        return None
    allowed = set()
    for lvl, feats in ISA_LEVELS[: levels.index(name) + 1]:
        # The AVX2_VNNI levels are not below AVX512_CORE in features oneDNN dispatches on.
        if name.startswith("AVX512") and lvl.startswith("AVX2_VNNI"):
            continue
        allowed.update(feats)
    return frozenset(allowed)


class OneDNN(Dispatch):
    """A framework whose CPU kernels may go through oneDNN: ``state``, the key of its adapter's
    environment that says whether they do (TensorFlow: "onednn", PyTorch: "mkldnn");
    ``off_switch``, the (variable, value) that turns oneDNN off, which names a lane. Its
    env_switches list ISA_CAP_SWITCHES and the off switch's variable."""

    facts = ("onednn",)
    # Results files written before the frameworks recorded their dispatch carry the cap at the top.
    older_environment_fields = ("onednn_max_cpu_isa",)

    def __init__(self, state: str, off_switch: tuple[str, str] | None = None):
        self.state, self.off_switch = state, off_switch

    @staticmethod
    def _cap(environment: dict) -> str | None:
        return next((environment[v] for v in ISA_CAP_SWITCHES if environment.get(v)), None)

    def _on(self, environment: dict) -> bool | None:
        state = environment.get(self.state)
        return None if state is None else bool(state)

    def kernel_features(self, cpu_features, environment):
        if self._on(environment) is False:
            return frozenset()
        cap = self._cap(environment)
        allowed = None if cap is None else isa_features(cap)
        return cpu_features if allowed is None else cpu_features & allowed

    def machine_facts(self, environment):
        on = self._on(environment)
        return {} if on is None else {"onednn": on}

    def lane(self, environment):
        cap = self._cap(environment)
        off = self.off_switch is not None and environment.get(self.off_switch[0]) == self.off_switch[1]
        return (f"-isa-{cap.lower()}" if cap else "") + ("-onednn-off" if off else "")

    def switches_excluding(self, features):
        """oneDNN capped below ``features`` (ONEDNN_MAX_CPU_ISA, the highest such level; AVX2
        before the rarer AVX2_VNNI levels)."""
        levels = [name for name, _ in reversed(ISA_LEVELS) if not name.startswith("AVX2_VNNI")]
        return {ISA_CAP_SWITCHES[0]: next(n for n in levels if not (isa_features(n) or set()) & features)}
