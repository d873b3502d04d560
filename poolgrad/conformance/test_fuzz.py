"""--fuzz N: N hypothesis-generated cases per target (see poolgrad/suite/fuzz.py). A divergence that
no finding in scope explains fails; hypothesis shrinks it and the minimal case is written to
--fuzz-out as a poolgrad-cases/1 file, ready for --case-file."""

import json
import zlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from poolgrad.cases import make_case, write_case_file
from poolgrad.reference import PoolSpec
from poolgrad.suite import check
from poolgrad.suite.fuzz import fuzz_cases


def test_fuzz(fuzz_target, poolgrad, request):
    config = request.config
    out = Path(config.getoption("fuzz_out")) / f"{fuzz_target.id}.json"
    info = poolgrad.describe(fuzz_target.framework)

    @settings(max_examples=config.getoption("fuzz"), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(fuzz_cases())
    def one(drawn):
        spec_dict, values = drawn
        spec = PoolSpec.from_dict(spec_dict)
        # The id names the content (spec, shape and values), so a failure's file says which
        # example it holds.
        digest = zlib.crc32(json.dumps(spec_dict, sort_keys=True).encode() + repr(values.shape).encode()
                            + values.tobytes())
        case = make_case(f"fuzz-{spec.op}{spec.rank}d-{spec.dtype}-{digest:08x}", "fuzz", spec, values)
        outcomes = poolgrad.runner.pool.run_group(fuzz_target, spec, [case.input], [case.grad_output],
                                                  config.getoption("case_timeout"))
        checked = check.check(case, fuzz_target, info.get("version") or "", outcomes, poolgrad.run.knowledge, 0.0,
                              poolgrad.machine(fuzz_target.framework))
        if checked.outcome in ("fail", "behaviour_changed"):
            # Hypothesis replays the shrunk example last, so the file ends up holding it.
            out.parent.mkdir(parents=True, exist_ok=True)
            write_case_file([case], out)
            raise AssertionError(f"{checked.message}\nminimal case: {out}\n{json.dumps(spec_dict)}")

    one()
