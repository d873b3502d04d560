"""Cases: the case model, the generated catalogue and users' case files.

    from poolgrad.cases import catalogue, families, load_case_file
"""

from poolgrad.reference.probes import routing_probe

from .case_file import CaseFileError, load_case_file, write_case_file
from .catalogue import catalogue, families
from .model import Case, make_case

__all__ = ["Case", "make_case", "routing_probe", "catalogue", "families", "load_case_file", "write_case_file",
           "CaseFileError"]
