#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
#
# A thin wrapper around rdma-core's own test suite (the copy Debian's
# python3-pyverbs installs under /usr/share/doc/rdma-core/tests, or the
# tests/ of a private rdma-core prefix with its pyverbs on PYTHONPATH), run
# the way its run_tests.py runs it, with two differences and no test
# changed:
#
# - the device's IP: rdma-core 44's suite reads it from the netdev it
#   finds under /sys/class/infiniband/DEV/device/net/, which soft RNICs
#   (rsiw, siw) have no parent device for; here it is the one NETDEV
#   names (NETDEV "-": the suite's own lookup, which in rdma-core 55 and
#   later asks `rdma link show` first and finds it). With --gid 0 (the suite
#   drops iWARP's GID, whose tail is all zeros, when it picks one itself)
#   its rdma_cm tests run.
# - a per-test timeout (SIGALRM in the test, then any child process left
#   is killed), and one "RESULT <test id> <ok|fail|error|skip|timeout>
#   <reason>" line per test for tests/userspace/rdmacore.sh to compare, and
#   "DONE <tests run>" once the whole suite has run (a run cut short by
#   a crash or the outer timeout lacks it). Before the tests, "PYVERBS
#   <path>" and "LIBIBVERBS <path>": the pyverbs and the libibverbs the
#   run uses.
#
#   rdmacore-run.py TESTS-DIR NETDEV TIMEOUT [run_tests.py args: --dev D --gid 0 ...]
import multiprocessing
import os
import signal
import sys
import unittest
from importlib.machinery import SourceFileLoader

tests_dir, netdev, per_test = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.argv = [sys.argv[0]] + sys.argv[4:]
sys.path.insert(0, tests_dir)
sys.path.insert(0, os.path.dirname(tests_dir))

from args_parser import parser  # noqa: E402  (the suite's own)

tests = SourceFileLoader('tests', os.path.join(tests_dir, '__init__.py')).load_module()
parser.parse_args()
import tests.base as base  # noqa: E402
import pyverbs  # noqa: E402


def _mapped(name):
    """The path of the shared object NAME this process mapped."""
    with open('/proc/self/maps') as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith(name):
                return path
    return 'none'


print(f'PYVERBS {os.path.dirname(pyverbs.__file__)}', flush=True)
print(f'LIBIBVERBS {_mapped("libibverbs.so")}', flush=True)


def _get_ip_mac(self, dev, port, idx):
    """base.RDMATestCase._get_ip_mac, with the netdev given to us."""
    try:
        ip_addr, mac_addr = self.get_ip_mac_address(netdev)
    except (KeyError, IndexError):
        self.args.append([dev, port, idx, None, None])
    else:
        self.args.append([dev, port, idx, ip_addr, mac_addr])


if netdev != '-':
    base.RDMATestCase._get_ip_mac = _get_ip_mac


class TestTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise TestTimeout(f'no result within {per_test} s')


class Result(unittest.TextTestResult):
    def startTest(self, test):
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(per_test)
        super().startTest(test)

    def stopTest(self, test):
        signal.alarm(0)
        for child in multiprocessing.active_children():
            child.kill()
            child.join(5)
        super().stopTest(test)

    def _line(self, test, kind, why=''):
        why = ' '.join(str(why).split())[:300]
        print(f'RESULT {test.id()} {kind} {why}', flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(test, 'ok')

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(test, 'skip', reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._line(test, 'ok', 'expected failure')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._line(test, 'fail', 'unexpected success')

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(test, 'fail', f'{err[0].__name__}: {err[1]}')

    def addError(self, test, err):
        super().addError(test, err)
        kind = 'timeout' if err[0] is TestTimeout else 'error'
        self._line(test, kind, f'{err[0].__name__}: {err[1]}')


suite = unittest.TestLoader().loadTestsFromModule(tests)
runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Result)
result = runner.run(suite)
print(f'DONE {result.testsRun}', flush=True)
