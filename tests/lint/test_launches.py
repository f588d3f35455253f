"""What counts as a vLLM launch, and which vLLM release it is linted against (issue 24)."""
from __future__ import annotations

import json
import os
import stat
import textwrap
from pathlib import Path

import pytest

from kvplan.lint import lint_paths
from kvplan.lint.engine import image_release
from kvplan.lint.formats import render
from kvplan.releases import DEFAULT_ENGINE_VERSION, known_releases
from tests.lint.helpers import lint_text as _lint
from tests.lint.helpers import write_file as _write

NEWEST = known_releases()[-1].version  # what :latest and upgrades mean


def _codes(report) -> list[tuple[int, str]]:
    return sorted((f.location.line, f.code) for f in report.findings)


RAY = """
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: vllm-server}
spec:
  entrypoint: vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --kv-cache-dtype fp9 --distributed-executor-backend ray
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
            - name: ray-head
              image: vllm/vllm-openai:v0.33.0
    workerGroupSpecs:
      - groupName: gpu
        template:
          spec:
            containers:
              - name: ray-worker
                image: vllm/vllm-openai:v0.33.0
                resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_ray_groups_are_not_launches_but_the_rayjob_entrypoint_is(tmp_path: Path) -> None:
    r = _lint(tmp_path, "rayjob.yaml", RAY)
    (launch,) = r.files[0].launches
    assert (launch.location.line, launch.model, launch.engine) == (5, "Qwen/Qwen3-8B", "0.33.0")
    assert _codes(r) == [(5, "KV803")]  # the fp9 in the entrypoint, nothing from the head/worker containers


def test_eval_exec_and_nested_bash_c_are_launches(tmp_path: Path) -> None:
    r = _lint(tmp_path, "run.sh", """
        #!/bin/sh
        ARGS="--max-model-len 4096"
        eval "exec vllm serve Qwen/Qwen3-8B $ARGS --kv-cache-dtype fp9"
        timeout 60 bash -c "vllm serve Qwen/Qwen3-8B --kv-cache-dtype fp8_e5m3"
        """)
    assert [li.model for li in r.files[0].launches] == ["Qwen/Qwen3-8B", "Qwen/Qwen3-8B"]
    assert [f.code for f in r.findings if f.code == "KV803"] == ["KV803", "KV803"]


EXTRA = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: d}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          {command}
          args: ["Qwen/Qwen3-8B"]
          env:
            - name: VLLM_ADDITIONAL_ARGS
              value: "--kv-cache-dtype fp9"
"""


def test_extra_args_env_is_appended_only_where_the_image_entrypoint_reads_it(tmp_path: Path) -> None:
    r = _lint(tmp_path, "a.yaml", EXTRA.format(command=""))
    assert _codes(r) == [(14, "KV803")]
    r = _lint(tmp_path, "b.yaml", EXTRA.format(command='command: ["vllm", "serve"]'))
    assert _codes(r) == []  # an explicit command does not read the variable


def test_kustomize_patches_are_launches_of_the_patched_container(tmp_path: Path) -> None:
    _write(tmp_path, "overlay/patch.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: vllm}
        spec:
          template:
            spec:
              containers:
                - name: vllm
                  args: ["--max-model-len", "8192", "--kv-cache-dtype", "fp8_e5m3"]
        """)
    _write(tmp_path, "overlay/kustomization.yaml", """
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources: [../base]
        patches:
          - target: {kind: Deployment, name: vllm}
            patch: |-
              - op: replace
                path: /spec/template/spec/containers/0/args
                value: ["--model", "Qwen/Qwen3-8B", "--kv-cache-dtype", "fp9"]
        """)
    r = lint_paths([str(tmp_path / "overlay")], cwd=tmp_path, isolated=True)
    files = {f.path: f for f in r.files}
    assert len(files["overlay/patch.yaml"].launches) == 1 and len(files["overlay/kustomization.yaml"].launches) == 1
    got = sorted((f.location.path, f.location.line, f.location.column, f.code) for f in r.findings)
    # the patch names no model (the base does): no KV804; the bad dtypes are found at their lines; the
    # kustomization's launch names its model, so it is planned for the default release (no KV009 there)
    assert got == [("overlay/kustomization.yaml", 9, 66, "KV803"), ("overlay/patch.yaml", 9, 66, "KV803")]


def test_helm_values_launches(tmp_path: Path) -> None:
    r = _lint(tmp_path, "values.yaml", """
        image:
          repository: vllm/vllm-openai
          tag: v0.33.0
          command: ["vllm", "serve", "Qwen/Qwen3-8B", "--kv-cache-dtype", "fp9"]
        servingEngineSpec:
          modelSpec:
            - name: llama
              repository: vllm/vllm-openai
              tag: v0.33.0
              modelURL: Qwen/Qwen3-8B
              requestGPU: 1
              vllmConfig:
                maxModelLen: 4096
                tensorParallelSize: 2
                enablePrefixCaching: true
                v1: 1
                extraArgs: ["--kv-cache-dtype", "fp8_e5m3"]
        """)
    assert r.files[0].kind == "helm-values" and [li.engine for li in r.files[0].launches] == ["0.33.0", "0.33.0"]
    assert _codes(r) == [(4, "KV803"), (14, "KV808"), (17, "KV803")]  # v1 is a chart key, not a flag


def test_helm_templates_get_one_note_per_chart_without_helm_and_are_rendered_with_it(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    chart = tmp_path / "chart"
    _write(chart, "Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n")
    _write(chart, "values.yaml", "modelName: Qwen/Qwen3-8B\n")
    tpl = """
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {{ .Release.Name }}
        spec:
          template:
            spec:
              containers:
                - name: vllm
                  image: vllm/vllm-openai:v0.33.0
                  args: ["{{ .Values.modelName }}", "--kv-cache-dtype", "fp9"]
        """
    _write(chart, "templates/a.yaml", tpl)
    _write(chart, "templates/b.yaml", tpl)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    r = lint_paths([str(chart)], cwd=tmp_path, isolated=True)
    notes = {f.note for f in r.files if f.kind == "helm-template"}
    assert r.findings == [] and len(notes) == 1 and "`helm` is not on PATH" in notes.pop()

    # A `helm` on PATH renders the chart once; its output is linted under the template's name.
    bindir = tmp_path / "bin"
    rendered = (textwrap.dedent(tpl).replace("{{ .Release.Name }}", "kvplan-lint")
                .replace("{{ .Values.modelName }}", "Qwen/Qwen3-8B"))
    _write(bindir, "helm", "#!/bin/sh\necho \"$@\" >> \"$0.calls\"\ncat <<'EOF'\n---\n# Source: c/templates/a.yaml\n"
           + rendered + "EOF\n")
    (bindir / "helm").chmod((bindir / "helm").stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{path}")
    r = lint_paths([str(chart)], cwd=tmp_path, isolated=True)
    assert [(f.location.path, f.code) for f in r.findings] == [("chart/templates/a.yaml", "KV803")]
    assert len((bindir / "helm.calls").read_text().splitlines()) == 1  # one render for the chart


@pytest.mark.parametrize("image, expected", [
    ("vllm/vllm-openai:v0.10.0", ("pinned", (0, 10, 0))),
    ("docker.io/vllm/vllm-openai:v0.25.0-ubuntu2404", ("pinned", (0, 25, 0))),
    ("vllm/vllm-openai:v0.6.6.post1", ("pinned", (0, 6, 6))),
    ("vllm/vllm-openai:latest", ("unpinned", "latest")),
    ("vllm/vllm-openai", ("unpinned", None)),
    ("lmcache/vllm-openai:latest", None),
    ("us-docker.pkg.dev/x/pytorch-vllm-serve:20250312_0916_RC01", None),
])
def test_image_release_reads_only_vllm_release_tags(image: str, expected) -> None:
    assert image_release(image) == expected


POD = """
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers:
    - name: vllm
      image: {image}
      args: ["Qwen/Qwen3-8B", "--calculate-kv-scales"]
"""


def test_pinned_release_is_honoured_and_older_ones_get_upgrade_findings(tmp_path: Path) -> None:
    new = _lint(tmp_path, "new.yaml", POD.format(image="vllm/vllm-openai:v0.33.0"))
    assert [(f.code, f.severity.value) for f in new.findings if f.code == "KV002"] == [("KV002", "error")]

    mid = _lint(tmp_path, "mid.yaml", POD.format(image="vllm/vllm-openai:v0.20.0"))  # still there, deprecated
    assert mid.files[0].launches[0].engine == "0.20.0" and "KV002" not in {f.code for f in mid.findings}

    old = _lint(tmp_path, "old.yaml", POD.format(image="vllm/vllm-openai:v0.10.0"))
    (note,) = [f for f in old.findings if f.code == "KV812"]
    assert "0.10.0" in note.message and note.severity.value == "info"
    (up,) = [f for f in old.findings if f.code == "KV002"]
    assert up.severity.value == "info" and up.upgrade_to == NEWEST
    assert up.message.startswith(f"on upgrade from vLLM 0.10.0 to {NEWEST}: ")
    assert old.summary.errors == 0 and old.files[0].launches[0].pinned == "0.10.0"

    latest = _lint(tmp_path, "latest.yaml", POD.format(image="vllm/vllm-openai:latest"))
    assert {f.code for f in latest.findings} >= {"KV813", "KV002"}


def test_sh_c_script_arguments_and_eval_of_them(tmp_path: Path) -> None:
    # llm-d / KServe shape: the container args become "$@" of an `eval "exec vllm serve ..."` script
    r = _lint(tmp_path, "d.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: d}
        spec:
          template:
            spec:
              containers:
                - name: main
                  image: vllm/vllm-openai:v0.33.0
                  command: ["/bin/sh", "-c", 'eval "exec vllm serve ${VLLM_ADDITIONAL_ARGS} $@"', "--"]
                  args: ["Qwen/Qwen3-8B", "--kv-cache-dtype", "fp9"]
                  env:
                    - name: VLLM_ADDITIONAL_ARGS
                      value: "--max-model-len 4096 --tensor-parallel-size 2"
                  resources: {limits: {nvidia.com/gpu: 1}}
        """)
    (launch,) = r.files[0].launches
    assert launch.model == "Qwen/Qwen3-8B"
    assert sorted(f.code for f in r.findings) == ["KV803", "KV808"]  # fp9, and TP 2 on one GPU


def test_helm_values_extra_args_list_is_a_partial_launch(tmp_path: Path) -> None:
    r = _lint(tmp_path, "values.yaml", """
        vllm:
          image: {repository: vllm/vllm-openai, tag: v0.33.0}
          extraArgs: ["--max-model-len", "8192", "--kv-cache-dtype", "fp9"]
        """)
    assert [f.code for f in r.findings] == ["KV803"]  # no "names no model": the chart's template sets it


def test_newer_release_and_docker_run_image_tags(tmp_path: Path) -> None:
    newer = _lint(tmp_path, "newer.yaml", POD.format(image="vllm/vllm-openai:v0.40.1"))
    (note,) = [f for f in newer.findings if f.code == "KV812"]
    assert "newer than the releases kvplan knows" in note.message and newer.files[0].launches[0].engine == NEWEST
    assert [f.severity.value for f in newer.findings if f.code == "KV002"] == ["error"]  # linted as newest, not upgrade
    r = _lint(tmp_path, "run.sh", """
        docker run --gpus all vllm/vllm-openai:v0.20.0 --model Qwen/Qwen3-8B --calculate-kv-scales
        """)
    assert r.files[0].launches[0].pinned == "0.20.0" and "KV002" not in {f.code for f in r.findings}


def test_latest_means_the_newest_modelled_release_whatever_engine_version_says(tmp_path: Path) -> None:
    (tmp_path / "kvplan.toml").write_text('[lint]\nengine-version = "0.20.0"\n')
    for name, image, engine in (("a.yaml", "vllm/vllm-openai:latest", NEWEST),
                                ("b.yaml", "registry.local/vllm-build:7", "0.20.0"),  # says nothing: config
                                ("c.yaml", "vllm/vllm-openai:v0.25.0", "0.25.0")):
        _write(tmp_path, name, POD.format(image=image))
        r = lint_paths([str(tmp_path / name)], cwd=tmp_path)
        assert r.files[0].launches[0].engine == engine, name


UNKNOWN_RELEASE_POD = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: vllm
      image: IMAGE
      command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
      args: ["--model=Qwen/Qwen3-8B", "--swap-space=16", "--enable-chunked-prefill=false", "--kv-cache-dtype=fp9"]
"""


def test_image_without_a_release_tag_makes_parser_exits_warnings_unless_engine_version_is_set(tmp_path: Path) -> None:
    vertex = "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/pytorch-vllm-serve:20250405_1205_RC01"
    r = _lint(tmp_path, "vertex.yaml", UNKNOWN_RELEASE_POD.replace("IMAGE", vertex))
    sev = {f.code: f.severity.value for f in r.findings}
    # --swap-space (older releases accept it) and an explicit value for a 0.33 boolean option: release-dependent
    assert sev["KV001"] == "warning" and sev["KV007"] == "warning"
    swap = next(f for f in r.findings if f.code == "KV001")
    assert swap.message.startswith(f"image {vertex} does not name its vLLM release (linted against vLLM "
                                   f"{DEFAULT_ENGINE_VERSION}")
    assert "--swap-space" in swap.message and "engine-version" in (swap.fix or "")
    # an invalid KV cache dtype is invalid in every release: still an error, and the run fails on it
    assert sev["KV803"] == "error" and r.summary.errors == 1

    # the same file with a vLLM release image, or with engine-version set: vLLM's parser exits, errors
    pinned = _lint(tmp_path, "pinned.yaml", UNKNOWN_RELEASE_POD.replace("IMAGE", "vllm/vllm-openai:v0.33.0"))
    assert {f.code: f.severity.value for f in pinned.findings}["KV001"] == "error"
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "kvplan.toml").write_text('[lint]\nengine-version = "0.33.0"\n')
    _write(tmp_path, "cfg/vertex.yaml", UNKNOWN_RELEASE_POD.replace("IMAGE", vertex))
    told = lint_paths([str(tmp_path / "cfg" / "vertex.yaml")], cwd=tmp_path)
    sev = {f.code: f.severity.value for f in told.findings}
    assert sev["KV001"] == "error" and sev["KV007"] == "error"
    assert not any("does not name its vLLM release" in f.message for f in told.findings)


RAY_SERVE_LLM = """
apiVersion: ray.io/v1
kind: RayService
metadata: {name: llm}
spec:
  serveConfigV2: |
    applications:
    - name: llms
      import_path: ray.serve.llm:build_openai_app
      args:
        llm_configs:
        - model_loading_config:
            model_id: qwen3
            model_source: Qwen/Qwen3-8B
          engine_kwargs:
            tensor_parallel_size: 2
            kv_cache_dtype: fp9
            enable_prefix_caching: false
            max_num_seqs: 64
            mamba_config: {}
            devices: auto
        - models/other.yaml
    - name: custom
      import_path: my_app.serve:deployment
      args: {model: whatever, kv_cache_dtype: fp9}
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers: [{name: ray-head, image: IMAGE}]
    workerGroupSpecs:
    - groupName: gpu
      template:
        spec:
          nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}
          containers: [{name: ray-worker, image: IMAGE, resources: {limits: {nvidia.com/gpu: 1}}}]
"""


def test_rayservice_serve_llm_configs_are_launches_with_engine_kwargs_as_flags(tmp_path: Path) -> None:
    r = _lint(tmp_path, "rs.yaml", RAY_SERVE_LLM.replace("IMAGE", "vllm/vllm-openai:v0.33.0"))
    (launch,) = r.files[0].launches  # the llm_configs entry; not the file reference, not the custom app
    assert launch.model == "Qwen/Qwen3-8B" and launch.engine == "0.33.0" and launch.gpu == "l4"
    assert launch.location.line == 13  # model_source, inside the block scalar, mapped to the file
    by = {f.code: f for f in r.findings}
    dtype = by["KV803"]  # engine_kwargs.kv_cache_dtype, at its value in the file
    assert "fp9" in dtype.message and (dtype.location.line, dtype.location.column) == (16, 29)
    assert dtype.location.yaml_path.startswith("spec.serveConfigV2>applications[0].args.llm_configs[0]")
    # a keyword argument is matched exactly: no prefix resolution to --device-ids, an error of its own
    unknown = by["KV001"]
    assert "engine_kwargs key 'devices'" in unknown.message and unknown.severity.value == "error"
    assert unknown.location.line == 20
    # enable_prefix_caching: false is --no-enable-prefix-caching, mamba_config a real engine argument: no finding
    assert sorted(f.code for f in r.findings) == ["KV001", "KV803"]

    # in a Ray image (its tag names no vLLM release) the unknown key is a warning saying so
    ray = _lint(tmp_path, "ray.yaml", RAY_SERVE_LLM.replace("IMAGE", "rayproject/ray-llm:2.50.1-py311-cu124"))
    kv001 = next(f for f in ray.findings if f.code == "KV001")
    assert kv001.severity.value == "warning" and "does not name its vLLM release" in kv001.message


def test_kustomize_json6902_patch_files_named_by_the_kustomization(tmp_path: Path) -> None:
    _write(tmp_path, "overlay/kustomization.yaml", """
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources: [../base]
        patchesJson6902:
          - target: {group: apps, version: v1, kind: Deployment, name: vllm}
            path: add-args.yaml
        patches:
          - path: replace-args.yaml
            target: {kind: Deployment, name: vllm-big}
          - path: controller.yaml
            target: {kind: Deployment, name: kustomize-controller}
        """)
    _write(tmp_path, "overlay/add-args.yaml", """
        - op: add
          path: /spec/template/spec/containers/0/args/-
          value: --kv-cache-dtype=fp9
        - op: add
          path: /spec/template/spec/containers/0/args/-
          value: --max-model-len
        - op: add
          path: /spec/template/spec/containers/0/args/-
          value: "8192"
        - op: replace
          path: /spec/replicas
          value: 2
        """)
    _write(tmp_path, "overlay/replace-args.yaml", """
        - op: replace
          path: /spec/template/spec/containers/0/args
          value:
            - --tensor-parallel-size=2
            - --kv-cache-dtyp=fp8
        """)
    # another server's flags appended the same way: not a vLLM launch, no finding
    _write(tmp_path, "overlay/controller.yaml", """
        - op: add
          path: /spec/template/spec/containers/0/args/-
          value: --concurrent=10
        """)
    r = lint_paths([str(tmp_path / "overlay")], cwd=tmp_path, isolated=True)
    files = {f.path: f for f in r.files}
    assert [len(files[f"overlay/{n}.yaml"].launches) for n in ("add-args", "replace-args", "controller")] == [1, 1, 0]
    assert files["overlay/controller.yaml"].status == "skipped"
    got = sorted((f.location.path, f.location.line, f.location.column, f.code) for f in r.findings)
    # the appended ops are one launch in operation order (--max-model-len takes "8192" from the next op);
    # the patches name no model (the base does): no KV804
    assert got == [("overlay/add-args.yaml", 3, 27, "KV803"), ("overlay/replace-args.yaml", 5, 7, "KV006")]


HELM_TPL = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args:
            - {{ .Values.modelName }}
            - --kv-cache-dtype=fp9
            - --max-model-len={{ .Values.maxLen }}
          {{- with .Values.extraArgs }}
            {{- toYaml . | nindent 12 }}
          {{- end }}
"""


def _fake_helm(tmp_path: Path, rendered: str, sleep: float = 0.0) -> Path:
    bindir = tmp_path / "bin"
    _write(bindir, "helm", f"#!/bin/sh\nsleep {sleep}\ncat <<'EOF'\n---\n# Source: c/templates/d.yaml\n{rendered}EOF\n")
    (bindir / "helm").chmod((bindir / "helm").stat().st_mode | stat.S_IEXEC)
    return bindir


def test_helm_template_findings_point_at_template_lines_where_exact(tmp_path: Path, monkeypatch) -> None:
    chart = tmp_path / "chart"
    _write(chart, "Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n")
    _write(chart, "values.yaml",
           "modelName: Qwen/Qwen3-8B\nmaxLen: big\nextraArgs: [--kv-cache-dtype-skip-layers=0,1]\n")
    _write(chart, "templates/d.yaml", HELM_TPL)
    # what `helm template` prints for it (the `with` block's output lands after the literal lines)
    rendered = (textwrap.dedent(HELM_TPL).lstrip("\n").replace("{{ .Release.Name }}", "kvplan-lint")
                .replace("{{ .Values.modelName }}", "Qwen/Qwen3-8B").replace("{{ .Values.maxLen }}", "big")
                .split("          {{- with")[0].rstrip("\n") + "\n            - --kv-cache-dtype-skip-layers=0,1\n")
    monkeypatch.setenv("PATH", f"{_fake_helm(tmp_path, rendered)}{os.pathsep}{os.environ['PATH']}")
    r = lint_paths([str(chart)], cwd=tmp_path, isolated=True)
    got = [(f.code, f.location.line, f.location.column, f.location.rendered) for f in r.findings]
    assert got == [
        ("KV803", 13, 32, False),  # --kv-cache-dtype=fp9, a literal template line: the template's line and column
        ("KV803", 3 + 14, 31, True),  # --max-model-len={{ .Values.maxLen }}: in the rendered output (3 header lines)
        ("KV301", 3 + 15, 44, True),  # the skip list came from values (toYaml): rendered output too
    ]
    (launch,) = r.files[0 if r.files[0].path.endswith("d.yaml") else 1].launches
    assert (launch.location.line, launch.location.rendered) == (10, False)  # the image line, literal in the template
    text = render(r, "text")
    assert "chart/templates/d.yaml:13:32: KV803 [error] invalid --kv-cache-dtype 'fp9'" in text
    assert "[line 17, column 31 of the `helm template` output of this template: a template action wrote it]" in text
    sarif = json.loads(render(r, "sarif"))
    regions = [res["locations"][0]["physicalLocation"].get("region") for res in sarif["runs"][0]["results"]]
    assert regions == [{"startLine": 13, "startColumn": 32}, None, None]  # rendered: the file, no line
    gh = render(r, "github")
    assert "file=chart/templates/d.yaml,line=13,col=32," in gh and "file=chart/templates/d.yaml,title=KV301" in gh


def test_rendering_a_chart_does_not_count_against_the_file_time_budget(tmp_path: Path, monkeypatch) -> None:
    chart = tmp_path / "chart"
    _write(chart, "Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n")
    spec = "spec: {containers: [{name: v, image: 'vllm/vllm-openai:v0.33.0', args: [Qwen/Qwen3-8B]}]}\n"
    _write(chart, "templates/d.yaml", "kind: Pod\napiVersion: v1\nmetadata: {name: '{{ .Release.Name }}'}\n" + spec)
    rendered = "kind: Pod\napiVersion: v1\nmetadata: {name: 'x'}\n" + spec
    monkeypatch.setenv("PATH", f"{_fake_helm(tmp_path, rendered, sleep=1.5)}{os.pathsep}{os.environ['PATH']}")
    r = lint_paths([str(chart)], cwd=tmp_path, isolated=True, file_timeout=1)
    assert "KV822" not in {f.code for f in r.findings}
    assert [len(f.launches) for f in r.files if f.path.endswith("d.yaml")] == [1]


def test_ray_serve_config_file_for_serve_run_is_linted_like_serve_config_v2(tmp_path: Path) -> None:
    r = _lint(tmp_path, "config.yaml", """
        applications:
        - name: llm_app
          import_path: ray.serve.llm:build_openai_app
          args:
            llm_configs:
            - model_loading_config: {model_id: q, model_source: Qwen/Qwen3-8B}
              engine_kwargs:
                kv_cache_dtype: fp9
                compilation_config: {cudagraph_mode: FULL}
        - name: mine
          import_path: my.module:app
        """)
    (launch,) = r.files[0].launches
    assert launch.model == "Qwen/Qwen3-8B" and r.files[0].kind == "vllm-config"
    # no image, so planned for the default release (backend rows verified: no KV009)
    assert [(f.code, f.location.line, f.location.column) for f in r.findings] == [("KV803", 8, 25)]


def test_rayservice_serve_config_v2_that_does_not_parse_is_kv801_at_its_line(tmp_path: Path) -> None:
    r = _lint(tmp_path, "rs.yaml", """
        apiVersion: ray.io/v1
        kind: RayService
        metadata: {name: llm}
        spec:
          serveConfigV2: |
            applications:
            - name: llms
              import_path: ray.serve.llm:build_openai_app
                args: [
        """)
    assert [(f.code, f.location.line) for f in r.findings] == [("KV801", 9)]
    assert "RayService serveConfigV2 YAML does not parse" in r.findings[0].message
