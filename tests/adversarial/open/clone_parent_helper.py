"""Round 48 demo (CPU, no GPU): a helper started with clone(CLONE_PARENT) is not the worker's child, so the
worker's in-process look (`watches.child_processes`, the `_inspect` after `time_calls` and after every call) does
not see it, even with the worker as subreaper (adopt_orphans). Only the judge's cgroup look after a request
could, and the helper can be gone by then (it exits on cue, before the last profiled call returns)."""
import ctypes, os, sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from kerneldojo.sandbox.worker.watches import adopt_orphans, adopts_orphans, child_processes

libc = ctypes.CDLL(None, use_errno=True)
CLONE_PARENT, SIGCHLD, SYS_clone = 0x00008000, 17, 56

def spawn_sibling(argv, env):
    pid = libc.syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os.execve(argv[0], argv, env)   # a scrubbed env: ncu's injection variables do not follow
    return pid

print("subreaper on:", adopt_orphans(), adopts_orphans())
baseline = set(child_processes())
# Stand-in for the helper: in the attack a fresh Python with its own CUDA context serving work over a pipe.
helper = spawn_sibling(["/bin/sleep", "1.5"], {})
normal = os.fork()
if normal == 0:
    os.execv("/bin/sleep", ["/bin/sleep", "1.5"])
time.sleep(0.2)
print("helper pid", helper, "alive:", os.path.exists(f"/proc/{helper}"),
      "its ppid:", open(f"/proc/{helper}/stat").read().rsplit(")", 1)[1].split()[1], "my ppid:", os.getppid())
print("plain fork child", normal, "seen by child_processes:", normal in child_processes())
print("CLONE_PARENT helper", helper, "seen by child_processes:", helper in child_processes())
print("new children the worker's _inspect would flag:", sorted(set(child_processes()) - baseline))
os.waitpid(normal, 0)
