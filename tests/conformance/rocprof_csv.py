"""Write a :class:`Trace` as rocprofv3 ``-f csv`` (7.x and 6.3) and ``rocpd convert`` write their
CSV files:

- 7.x (rocm-systems ``projects/rocprofiler-sdk/source/lib/output/generateCSV.cpp``):
  ``<pid>_kernel_trace.csv`` (Stream_Id; LDS_Block_Size, Scratch_Size, VGPR/SGPR counts),
  ``<pid>_hip_api_trace.csv`` and ``<pid>_marker_api_trace.csv`` (Domain, Function, Process_Id,
  Thread_Id, Correlation_Id, Start/End_Timestamp). A marker row is written per range when it is
  popped, Function = the range's message (``get_marker_message`` of its correlation id).
  ``<pid>_agent_info.csv``: one row per agent (CPU and GPU) sorted by node id, the 53 columns of
  ``generate_csv(..., std::vector<agent_info>&)`` (Node_Id, Logical_Node_Id, Agent_Type, ...,
  Name, Vendor_Name, Product_Name, Model_Name); written by both generations alike.
- 6.3 (ROCm/rocprofiler-sdk ``source/lib/rocprofiler-sdk-tool/generateCSV.cpp`` L248-265): no
  Stream_Id; Private_Segment_Size and Group_Segment_Size instead of the LDS..SGPR columns.
- ``rocpd convert`` (``source/lib/python/rocpd/csv.py``, ``write_kernel_csv`` /
  ``write_region_csv``): a leading Guid column, ``stack_id`` as Correlation_Id, Duration,
  Lds_Block_Size/Vgpr_Count spelling, Graph_Exec_Id/Graph_Node_Id where the schema has them
  (>= 3.0.2); regions (HIP calls and roctx ranges, named by their operation) in
  ``regions_trace.csv``; ``agent_info.csv`` with the same agent columns after its Guid
  (``source/lib/python/rocpd/source/csv.cpp``, the agent-info writer).

Strings are quoted, numbers bare, as rocprofv3 writes them. A kernel's ``Agent_Id`` is
``Agent <id>`` (7.x ``--agent-index`` absolute or relative, the default; ``rocpd convert``'s
``--agent-index-value`` the same) or, type-relative, ``GPU <n>``: the GPU's index among the
node's GPUs (``metadata.cpp`` ``create_agent_index``: label and index joined by a space; the
trace's GPU is the node's only one, so ``GPU 0``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conformance.model import RANGE_KIND, RANGE_OP, Trace

LAYOUTS = ("7", "6.3", "convert")
AGENT_INDEX = ("relative", "type-relative")


def agent_text(trace: Trace, agent_index: str) -> str:
    """The kernel rows' ``Agent_Id`` under ``--agent-index``."""
    if agent_index not in AGENT_INDEX:
        raise ValueError(f"no --agent-index {agent_index!r}")
    return "GPU 0" if agent_index == "type-relative" else f"Agent {trace.agent}"


API_HEADER = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id",
              "Start_Timestamp", "End_Timestamp"]  # fmt: skip


def _line(vals: list[Any]) -> str:
    return ",".join(f'"{v}"' if isinstance(v, str) else str(v) for v in vals)


def _write(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([_line(header)] + [_line(r) for r in rows]) + "\n")
    return path


AGENT_INFO_HEADER = [
    "Node_Id", "Logical_Node_Id", "Agent_Type", "Cpu_Cores_Count", "Simd_Count",
    "Cpu_Core_Id_Base", "Simd_Id_Base", "Max_Waves_Per_Simd", "Lds_Size_In_Kb", "Gds_Size_In_Kb",
    "Num_Gws", "Wave_Front_Size", "Num_Xcc", "Cu_Count", "Array_Count", "Num_Shader_Banks",
    "Simd_Arrays_Per_Engine", "Cu_Per_Simd_Array", "Simd_Per_Cu", "Max_Slots_Scratch_Cu",
    "Gfx_Target_Version", "Vendor_Id", "Device_Id", "Location_Id", "Domain", "Drm_Render_Minor",
    "Num_Sdma_Engines", "Num_Sdma_Xgmi_Engines", "Num_Sdma_Queues_Per_Engine", "Num_Cp_Queues",
    "Max_Engine_Clk_Ccompute", "Max_Engine_Clk_Fcompute", "Sdma_Fw_Version", "Fw_Version",
    "Capability", "Cu_Per_Engine", "Max_Waves_Per_Cu", "Family_Id", "Workgroup_Max_Size",
    "Grid_Max_Size", "Local_Mem_Size", "Hive_Id", "Gpu_Id", "Workgroup_Max_Dim_X",
    "Workgroup_Max_Dim_Y", "Workgroup_Max_Dim_Z", "Grid_Max_Dim_X", "Grid_Max_Dim_Y",
    "Grid_Max_Dim_Z", "Name", "Vendor_Name", "Product_Name", "Model_Name",
]  # fmt: skip


def agent_info_rows(trace: Trace) -> list[list[Any]]:
    """A CPU agent (node 0) and the trace's GPU (node ``trace.agent``, logical node 1), the
    fields the writer emits in header order (numbers bare, strings quoted)."""
    cpu = [0, 0, "CPU", 96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
           0, 0, 0, 0, 3600, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
           "AMD EPYC 9654", "CPU", "AMD EPYC 9654", ""]  # fmt: skip
    gpu = [trace.agent, 1, "GPU", 0, 1216, 0, 2147487744, 8, 64, 0, 64, 64, 8, 304, 32, 32, 1,
           10, 4, 32, 90402, 4098, 29857, 33536, 0, 136, 2, 14, 8, 24, 0, 2100, 20, 177, 0, 10,
           32, 141, 1024, 4294967295, 0, 0, 64765, 1024, 1024, 1024, 4294967295, 65535, 65535,
           trace.arch or "", "AMD", trace.product or "", ""]  # fmt: skip
    if len(cpu) != len(AGENT_INFO_HEADER) or len(gpu) != len(AGENT_INFO_HEADER):
        raise ValueError("agent_info rows must match the header")
    return [cpu, gpu]


def write_csv(
    trace: Trace,
    folder: Path,
    layout: str = "7",
    graph_ids: bool = True,
    agent_index: str = "relative",
) -> list[Path]:
    """The CSV files of ``trace`` in ``folder`` (rocprofv3 writes them under ``<host>/``);
    ``agent_index``: rocprofv3's ``--agent-index`` (7.x and ``rocpd convert`` only)."""
    if layout == "convert":
        return _convert(trace, folder, graph_ids, agent_index)
    agent = agent_text(trace, agent_index if layout != "6.3" else "relative")
    pre = f"{trace.pid}_"
    if layout == "6.3":
        header = ["Kind", "Agent_Id", "Queue_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
                  "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp",
                  "Private_Segment_Size", "Group_Segment_Size", "Workgroup_Size_X",
                  "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y",
                  "Grid_Size_Z"]  # fmt: skip
        rows = [["KERNEL_DISPATCH", agent, 1, trace.tid, k.dispatch_id, k.kernel_id, k.name,
                 k.corr, k.start, k.end, 0, 0, *k.block, *k.grid] for k in trace.kernels]  # fmt: skip
    else:
        header = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id",
                  "Kernel_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp",
                  "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
                  "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y",
                  "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]  # fmt: skip
        rows = [["KERNEL_DISPATCH", agent, 1, 0, trace.tid, k.dispatch_id, k.kernel_id, k.name,
                 k.corr, k.start, k.end, 0, 0, 64, 0, 32, *k.block, *k.grid]
                for k in trace.kernels]  # fmt: skip
    out = [_write(folder / f"{pre}kernel_trace.csv", header, rows)]
    if trace.arch is not None:
        out.append(
            _write(folder / f"{pre}agent_info.csv", AGENT_INFO_HEADER, agent_info_rows(trace))
        )
    if trace.apis:
        api = [[a.kind, a.name, trace.pid, trace.tid, a.corr, a.start, a.end] for a in trace.apis]
        out.append(_write(folder / f"{pre}hip_api_trace.csv", API_HEADER, api))
    if trace.markers:
        domain = "MARKER_CORE_API" if layout == "6.3" else RANGE_KIND
        mk = [[domain, m.message, trace.pid, trace.tid, m.corr, m.start, m.end]
              for m in trace.markers]  # fmt: skip
        out.append(_write(folder / f"{pre}marker_api_trace.csv", API_HEADER, mk))
    return out


def _convert(trace: Trace, folder: Path, graph_ids: bool, agent_index: str) -> list[Path]:
    guid = f"0190{trace.pid:04x}-0000-7000-8000-000000000000"
    graph = ["Graph_Exec_Id", "Graph_Node_Id"] if graph_ids else []
    header = ["Guid", "Kind", "Agent_Id", "Queue_Id", "Stream_Id", *graph, "Thread_Id",
              "Dispatch_Id", "Kernel_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp",
              "End_Timestamp", "Duration", "Lds_Block_Size", "Scratch_Size", "Vgpr_Count",
              "Accum_Vgpr_Count", "Sgpr_Count", "Workgroup_Size_X", "Workgroup_Size_Y",
              "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]  # fmt: skip
    rows = []
    for k in sorted(trace.kernels, key=lambda k: (k.start, -k.end)):
        g = [k.graph_exec, k.graph_node] if graph_ids else []
        rows.append([guid, "KERNEL_DISPATCH", agent_text(trace, agent_index), 1, 0, *g, trace.tid,
                     k.dispatch_id, k.kernel_id, k.name, k.corr, k.start, k.end,
                     k.end - k.start, 0, 0, 64, 0, 32, *k.block, *k.grid])  # fmt: skip
    out = [_write(folder / "kernel_trace.csv", header, rows)]
    if trace.arch is not None:  # the same agent rows, after the Guid column (csv.cpp)
        info = [[guid, *r] for r in agent_info_rows(trace)]
        out.append(_write(folder / "agent_info.csv", ["Guid", *AGENT_INFO_HEADER], info))
    regions = [(a.kind, a.name, a.corr, a.start, a.end) for a in trace.apis]
    regions += [(RANGE_KIND, RANGE_OP, m.corr, m.start, m.end) for m in trace.markers
                if not m.is_mark]  # fmt: skip
    regions.sort(key=lambda r: (r[3], -r[4]))
    reg = [[guid, d, f, trace.pid, trace.tid, c, s, e] for d, f, c, s, e in regions]
    out.append(_write(folder / "regions_trace.csv", ["Guid", *API_HEADER], reg))
    return out
