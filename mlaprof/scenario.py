"""Scenarios: model shapes after tensor parallelism, speculative tokens, request mix, device
presets, and vLLM's exact capture sizes and uniform-batch padding (vLLM 0.32's sources)."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mlaprof.capture_sizes import CapturePlan, capture_plan, capture_sizes, rule_for
from mlaprof.devices import DEVICES, DevicePreset  # re-exported: presets live in devices.py
from mlaprof.errors import MlaprofError

if TYPE_CHECKING:
    from mlaprof.splits.routing import Route

# torch's intra-op threads of a CPU run (`run --threads`). torch's own default, a thread per core,
# oversubscribes a shared machine: a loaded 2-core machine made the default run's median step
# 4.76 s with it and 0.41 s with one thread.
DEFAULT_THREADS = 1

LATENT = 512
ROPE = 64
KV_DIM = LATENT + ROPE


@dataclass(frozen=True)
class ModelPreset:
    name: str
    heads: int  # query heads per rank, after tensor parallelism
    layers: int  # attention layers of the full model
    description: str


MODELS: dict[str, ModelPreset] = {
    m.name: m
    for m in (
        ModelPreset("deepseek-v3-tp1", 128, 61, "DeepSeek-V3/R1, 128 heads, no tensor parallelism"),
        ModelPreset("deepseek-v3-tp2", 64, 61, "DeepSeek-V3/R1 at TP2: 64 heads per rank"),
        ModelPreset("deepseek-v3-tp4", 32, 61, "DeepSeek-V3/R1 at TP4: 32 heads per rank"),
        ModelPreset("deepseek-v3-tp8", 16, 61, "DeepSeek-V3/R1 at TP8: 16 heads per rank"),
        ModelPreset("kimi-k2-tp8", 8, 61, "Kimi-K2 class (64 heads) at TP8: 8 heads per rank"),
        ModelPreset("kimi-k2-tp4", 16, 61, "Kimi-K2 class (64 heads) at TP4: 16 heads per rank"),
        # UNVERIFIED layer count: AITER PR #4507 reports 12 heads per rank for this class at TP8
        ModelPreset("kimi-k3-tp8", 12, 61, "Kimi-K3 class (96 heads) at TP8: 12 heads per rank"),
    )
}


GRAPH_MODES = ("FULL", "PIECEWISE", "NONE")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
MIN_KV_MODES = ("all-rows", "active-rows")


@dataclass
class Scenario:
    """One profiling scenario. Build from flags, a TOML file, or :func:`default_scenario`."""

    name: str = "default"
    model: str = "kimi-k2-tp8"  # 8 heads: vLLM routes its verify to mla_gluon (see route())
    num_speculative_tokens: int = 3
    kv_lens: list[int] = field(default_factory=lambda: [1040, 2600, 6000])
    accepted_per_step: int = 2  # KV growth per request per step (accepted tokens + bonus)
    max_num_seqs: int = 256
    max_model_len: int = 131072
    graph_mode: str = "FULL"
    min_kv_mode: str = "all-rows"  # the bug; "active-rows" is the fix
    policy: str = "aiter-gluon-v0.1.19"  # split policy driving the backend
    target: str = "mi355x"  # device preset for the split/occupancy model
    page_size: int = 1
    layers: int = 4
    steps: int = 6
    seed: int = 0
    kv_cache_dtype: str = "auto"  # vLLM cache_dtype: auto (the model's bf16) or fp8
    vllm_version: str = "0.34.0"  # whose routing to model (mlaprof.splits.routing.VERSIONS)
    kv_cache_tokens: int = 0  # KV cache size per rank in tokens (0: unknown); sizes buffers
    max_num_batched_tokens: int = 0  # vLLM's; 0: not limiting (capture sizes stop there)
    aiter_version: str = ""  # the AITER release the stack runs ("": the policy's own tag)

    # -- derived -----------------------------------------------------------------------------
    @property
    def qlen(self) -> int:
        return 1 + self.num_speculative_tokens

    @property
    def model_preset(self) -> ModelPreset:
        return MODELS[self.model]

    @property
    def heads(self) -> int:
        return self.model_preset.heads

    @property
    def device_preset(self) -> DevicePreset:
        return DEVICES[self.target]

    def route(self) -> Route:
        """The verify path vLLM takes for this scenario (AITER backend on ROCm targets)."""
        from mlaprof.splits.routing import RouteConfig, non_rocm_route, verify_route

        if not self.device_preset.arch.startswith("gfx"):
            return non_rocm_route(
                self.device_preset.name,
                self.vllm_version,
                self.device_preset.arch,
                self.kv_cache_dtype,
            )
        kv_bytes = None
        if self.kv_cache_tokens:
            kv_bytes = self.kv_cache_tokens * KV_DIM * (1 if self.kv_cache_dtype != "auto" else 2)
        cfg = RouteConfig(
            self.heads,
            self.qlen,
            self.kv_cache_dtype,
            self.device_preset.arch,
            kv_cache_bytes=kv_bytes,
            mtp_decode_qlen=self.qlen,
        )
        return verify_route(cfg, self.vllm_version)

    def capture_sizes(self) -> list[int]:
        """The sizes the scenario's vLLM version captures (mlaprof.capture_sizes)."""
        return capture_sizes(
            self.max_num_seqs, self.num_speculative_tokens, self.graph_mode,
            rule_for(self.vllm_version), self.max_num_batched_tokens or None, self.target,
        )  # fmt: skip

    def capture_plan(self) -> CapturePlan:
        """The graphs the scenario's vLLM version captures and how it dispatches a batch."""
        return capture_plan(
            rule_for(self.vllm_version), self.max_num_seqs, self.num_speculative_tokens,
            None, self.max_num_batched_tokens or None, device=self.target,
        )  # fmt: skip

    def aiter_rule(self) -> dict[str, Any] | None:
        """The modelled AITER rule standing for ``aiter_version`` and its label (None: unset)."""
        if not self.aiter_version:
            return None
        from mlaprof.splits.releases import aiter_rule

        return aiter_rule(self.aiter_version).to_dict()

    def step_kv_lens(self, step: int) -> list[int]:
        """KV lengths (including the verify tokens) of the real requests at ``step``."""
        return [n + step * self.accepted_per_step for n in self.kv_lens]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> Scenario:
        """Raise :class:`MlaprofError` naming the first bad value."""

        def bad(what: str) -> MlaprofError:
            return MlaprofError(f"scenario {self.name!r}: {what}")

        if self.model not in MODELS:
            raise bad(f"unknown model preset {self.model!r}; choose one of {', '.join(MODELS)}")
        if self.target not in DEVICES:
            raise bad(f"unknown device preset {self.target!r}; choose one of {', '.join(DEVICES)}")
        if not 0 <= self.num_speculative_tokens <= 7:
            raise bad(f"num_speculative_tokens must be 0..7, got {self.num_speculative_tokens}")
        if not self.kv_lens:
            raise bad("kv_lens is empty: give at least one request")
        if len(self.kv_lens) > 1024:
            raise bad(f"{len(self.kv_lens)} requests is more than 1024")
        for n in self.kv_lens:
            if not isinstance(n, int) or n < self.qlen:
                raise bad(f"every KV length must be an integer >= qlen ({self.qlen}), got {n!r}")
            if n > 4_194_304:
                raise bad(f"KV length {n} is more than 4M tokens")
        if self.graph_mode not in GRAPH_MODES:
            raise bad(
                f"graph_mode must be one of {', '.join(GRAPH_MODES)}, got {self.graph_mode!r}"
            )
        if self.min_kv_mode not in MIN_KV_MODES:
            raise bad(f"min_kv_mode must be one of {', '.join(MIN_KV_MODES)}")
        for name, lo, hi in (
            ("layers", 1, 256),
            ("steps", 1, 100_000),
            ("page_size", 1, 1024),
            ("max_num_seqs", 1, 4096),
            ("accepted_per_step", 0, 64),
            ("max_model_len", 1, 16_777_216),
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise bad(f"{name} must be an integer in {lo}..{hi}, got {v!r}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise bad(f"kv_cache_dtype must be one of {', '.join(KV_CACHE_DTYPES)}")
        from mlaprof.splits.routing import VERSIONS

        if self.vllm_version not in VERSIONS:
            raise bad(f"vllm_version must be one of {', '.join(VERSIONS)}")
        if not isinstance(self.max_num_batched_tokens, int) or self.max_num_batched_tokens < 0:
            raise bad(
                f"max_num_batched_tokens must be an integer >= 0, got {self.max_num_batched_tokens!r}"
            )
        if self.max_num_batched_tokens:
            from mlaprof.capture_sizes import check_batched_tokens

            try:
                check_batched_tokens(self.max_num_batched_tokens, self.max_num_seqs)
            except MlaprofError as e:
                raise bad(str(e)) from None
        if self.aiter_version:
            from mlaprof.splits import releases

            rule = releases.aiter_rule(self.aiter_version)  # raises for junk / too old
            runs = releases.policy_for(self.aiter_version)
            if self.policy.startswith("aiter-gluon-v0.1.") and self.policy != runs:
                raise bad(
                    f"aiter_version {self.aiter_version} runs {runs} "
                    f"({rule.label}), not policy {self.policy}"
                )
        if not isinstance(self.kv_cache_tokens, int) or self.kv_cache_tokens < 0:
            raise bad(f"kv_cache_tokens must be an integer >= 0, got {self.kv_cache_tokens!r}")
        from mlaprof.splits.policies import POLICIES

        if self.policy not in POLICIES:
            raise bad(f"unknown split policy {self.policy!r}; choose one of {', '.join(POLICIES)}")
        return self


def default_scenario() -> Scenario:
    """8 heads (Kimi-K2 at TP8, a shape vLLM sends to mla_gluon's 4-D verify), 3 speculative
    tokens, 3 requests padded to a FULL graph of 4 requests (capture size 16): the padding row pins
    min_kv_seq_len to qlen, and aiter gluon v0.1.19 runs S = 1 where the fix gives 16 and the real
    rows alone 17."""
    return Scenario().validate()


SCENARIOS: dict[str, Scenario] = {
    "default": Scenario(),
    "deepseek-v3-tp8": Scenario(
        name="deepseek-v3-tp8", model="deepseek-v3-tp8", policy="aiter-asm-persistent"
    ),
    "c1-long": Scenario(
        name="c1-long", kv_lens=[131072], num_speculative_tokens=3, accepted_per_step=2
    ),
    "c16": Scenario(
        name="c16",
        kv_lens=[1024 + 997 * i % 7000 for i in range(13)],
        num_speculative_tokens=3,
    ),
    "kimi-k2-tp8": Scenario(name="kimi-k2-tp8", model="kimi-k2-tp8", kv_lens=[3000, 5000, 9000]),
    # 64 heads (DeepSeek-V3 at TP2): gluon sends them to bh64 (needs B % 64 == 0); vLLM routes
    # 64 heads to the persistent ASM decode
    "deepseek-v3-tp2": Scenario(
        name="deepseek-v3-tp2",
        model="deepseek-v3-tp2",
        kv_lens=[4096] * 3,
        policy="aiter-asm-persistent",
    ),
    # 12 heads: vLLM's gluon verify on gfx950 (12 < 16, not a divisor of 16 for decode)
    "kimi-k3-tp8": Scenario(
        name="kimi-k3-tp8",
        model="kimi-k3-tp8",
        kv_lens=[3000, 5000, 9000],
        policy="aiter-gluon-v0.1.20",
    ),  # fmt: skip
    "deepseek-tp1": Scenario(
        name="deepseek-tp1",
        model="deepseek-v3-tp1",
        kv_lens=[4096] * 3,
        policy="aiter-asm-persistent",
    ),
}


_FIELDS = {f.name: f for f in dataclasses.fields(Scenario)}

_S = TypeVar("_S")
# settings whose default means "not set" (kv_cache_tokens 0: unknown; max_num_batched_tokens 0:
# not limiting; aiter_version "": the policy's own tag), never a value the run used
UNSET: dict[str, Any] = {"kv_cache_tokens": 0, "max_num_batched_tokens": 0, "aiter_version": ""}


def set_settings(sc: _S) -> _S:
    """A recorded scenario (the summary's section) with the settings left at their "not set"
    default (:data:`UNSET`) as None: a summary shows them absent, never a 0 that reads as the
    run's value."""
    unset = {k: None for k, v in UNSET.items() if getattr(sc, k, None) == v}
    return dataclasses.replace(sc, **unset) if unset else sc  # type: ignore[type-var]


def scenario_from_mapping(doc: dict[str, Any], base: Scenario | None = None) -> Scenario:
    """Overlay ``doc`` (from TOML or flags) on ``base``; unknown keys and wrong types raise."""
    sc = dataclasses.replace(base or Scenario())
    for key, value in doc.items():
        k = key.replace("-", "_")
        if k not in _FIELDS:
            raise MlaprofError(f"unknown scenario key {key!r}; known: {', '.join(_FIELDS)}")
        want = type(getattr(sc, k))
        if want is list:
            if not isinstance(value, list):
                raise MlaprofError(f"scenario key {key!r} must be a list of integers")
        elif want is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise MlaprofError(f"scenario key {key!r} must be an integer, got {value!r}")
        elif want is str and not isinstance(value, str):
            raise MlaprofError(f"scenario key {key!r} must be a string, got {value!r}")
        setattr(sc, k, list(value) if want is list else value)
    return sc.validate()


def load_scenario(spec: str) -> Scenario:
    """A preset name (see ``SCENARIOS``) or the path of a TOML file."""
    if spec in SCENARIOS:
        return dataclasses.replace(SCENARIOS[spec]).validate()
    path = Path(spec)
    if path.suffix.lower() == ".toml" or path.exists():
        if not path.is_file():
            raise MlaprofError(f"scenario file {path} does not exist")
        try:
            doc = tomllib.loads(path.read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise MlaprofError(f"scenario file {path} is not valid TOML: {e}") from None
        doc.setdefault("name", path.stem)
        return scenario_from_mapping(doc)
    raise MlaprofError(
        f"unknown scenario {spec!r}: give a preset ({', '.join(SCENARIOS)}) or a .toml file"
    )
