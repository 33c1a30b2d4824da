"""The clinical commands: a cited answer to a question, a differential diagnosis from phenotypes, a
radiology report draft from a study."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from service.cli.common import JsonOpt, container, emit, err, fail, out


def ask(
    question: Annotated[str, typer.Argument(help="A clinical question.")],
    session: Annotated[
        str | None, typer.Option("--session", help="A session id to continue, or 'new' to start one.")
    ] = None,
    k: Annotated[int, typer.Option(min=1, max=50, help="Passages at most.")] = 8,
    hops: Annotated[int, typer.Option(min=0, max=4, help="Longest path between linked entities.")] = 2,
    mode: Annotated[str, typer.Option(help="auto (LLM when configured), extractive or llm.")] = "auto",
    budget: Annotated[int | None, typer.Option(min=100, max=16000, help="Tokens of evidence at most.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question from the knowledge graph and the literature, every statement cited."""
    from service.cli.render import print_answer
    from service.qa.engine import QAOptions, UnknownSession
    from service.qa.llm import LLMError

    if mode not in ("auto", "extractive", "llm"):
        raise fail(f"--mode must be auto, extractive or llm, not {mode!r}")
    with container() as c:
        session_id = c.sessions.create().id if session == "new" else session
        try:
            r = c.qa.ask(question, session_id, QAOptions(k=k, hops=hops, mode=mode, budget=budget))  # type: ignore[arg-type]
        except UnknownSession:
            raise fail(f"no session {session_id!r} (unknown or expired): start one with --session new") from None
        except LLMError as exc:
            raise fail(f"the LLM failed ({exc.status}): {exc}", code=3) from None

    def render(_: Any) -> None:
        print_answer(out, r)
        if session_id:
            err.print(f"session: {session_id}")

    emit(r.model_dump(mode="json"), as_json, render)


def differential(
    terms: Annotated[
        list[str] | None, typer.Argument(help="Observed HPO terms, e.g. HP:0001250 HP:0000252.", show_default=False)
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", help="An HPO term the patient does not have.")
    ] = None,
    text: Annotated[
        str | None,
        typer.Option(
            "--text",
            help='The patient described in words, linked to HPO terms; what it negates ("no hypotonia") is excluded.',
        ),
    ] = None,
    top_k: Annotated[int, typer.Option("--top", min=1, max=500, help="How many diseases.")] = 10,
    namespace: Annotated[list[str] | None, typer.Option(help="Rank only OMIM, ORPHA or DECIPHER diseases.")] = None,
    gene: Annotated[
        list[str] | None,
        typer.Option("--gene", help="A candidate gene (HGNC symbol): rank only the diseases associated with it."),
    ] = None,
    phenopacket: Annotated[
        Path | None,
        typer.Option(
            "--phenopacket",
            help="A GA4GH Phenopacket v2 (JSON): its observed and excluded phenotypic features, the genes of "
            "its interpretations and its subject's sex and age are added to the case.",
            show_default=False,
        ),
    ] = None,
    sex: Annotated[
        str | None,
        typer.Option(
            "--sex",
            help="The patient's sex, male or female: weighs X- and Y-linked diseases (else read from --text or "
            "the phenopacket).",
            show_default=False,
        ),
    ] = None,
    age: Annotated[
        float | None,
        typer.Option(
            "--age",
            min=0,
            max=130,
            help="The patient's age in years: a disease of later onset weighs less (else read as --sex is).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Diseases (OMIM/ORPHA) ranked for a patient's HPO terms (or a description, --text, or a phenopacket,
    --phenopacket), with matched phenotypes, genes and PMIDs."""
    from kg.curie import normalize_curie
    from kg.differential import disease_namespaces, terms_in_text, terms_mentioned
    from kg.differential.patient import Patient, first_known, read_patient
    from kg.differential.phenopacket import read_phenopacket_file
    from kg.errors import InvalidInput

    if not terms and not text and not phenopacket:
        raise fail("give observed HPO terms (HP:...), --text or --phenopacket")
    if sex is not None and sex.strip().lower() not in ("male", "female"):
        raise fail(f"--sex is male or female, not {sex!r}")
    try:
        namespaces = disease_namespaces(namespace or [])  # omim, MIM, Orphanet... as OMIM, ORPHA
        packet = read_phenopacket_file(phenopacket) if phenopacket else None
    except InvalidInput as exc:
        raise fail(str(exc)) from None
    terms = [*(terms or []), *(packet.observed if packet else [])]
    exclude = [*(exclude or []), *(packet.excluded if packet else [])]
    gene = list(dict.fromkeys([*(gene or []), *(packet.genes if packet else [])]))
    with container() as c:
        from_text, excluded_from_text = terms_in_text(c.linker, text) if text else ([], [])
        observed = list(dict.fromkeys([*(normalize_curie(t) for t in terms), *from_text]))
        given_excluded = list(dict.fromkeys([*(normalize_curie(t) for t in exclude), *excluded_from_text]))
        index = c.phenotype_index
        case = index.read_case(observed, given_excluded)
        known, excluded = case.observed, case.excluded
        if not known and case.ignored:
            why = "; ".join(f"{t}: {w}" for t, w in case.ignored.items())
            raise fail(f"no observed term is a phenotypic abnormality ({why})")
        if not known:
            given = ", ".join(observed) or "none linked from the text"
            raise fail(f"none of the terms is an HPO term in the graph: {given} (run `medkg ingest hpo`)")
        genes, unknown_genes = index.known_genes(gene or [])
        if unknown_genes and not genes:
            raise fail(f"no disease in the graph is associated with {', '.join(unknown_genes)}")
        given = Patient(sex.strip().lower() if sex else None, age)
        patient = first_known(given, packet.patient if packet else None, read_patient(text or ""))
        ranked = index.rank(known, excluded, top_k=top_k, prefixes=namespaces, genes=genes, patient=patient)
        mentioned = terms_mentioned(ranked, known, excluded)
        names = c.graph.get_entities([r.disease for r in ranked] + mentioned)
    data = {
        "observed": known,
        "from_text": from_text,
        "excluded_from_text": excluded_from_text,
        "unknown_terms": case.unknown,
        "ignored_terms": case.ignored,
        "replaced_terms": {**index.replacements(observed), **index.replacements(given_excluded, broaden=False)},
        "excluded": excluded,
        "patient": {"sex": patient.sex, "age_years": patient.age_years},
        "genes": genes,
        "unknown_genes": unknown_genes,
        "views": index.views(),
        "diseases": [{**r.__dict__, "name": names[r.disease].name if r.disease in names else None} for r in ranked],
        "term_names": {t: names[t].name for t in mentioned if t in names and names[t].name},
    }

    def render(d: dict[str, Any]) -> None:
        named = d["term_names"]
        for label, key in (("from the text", "from_text"), ("negated in the text, excluded", "excluded_from_text")):
            if d[key]:
                err.print(f"{label}: {', '.join(f'{named.get(t, t)} ({t})' for t in d[key])}", highlight=False)
        if d["unknown_terms"]:
            err.print(f"not in the graph, ignored: {', '.join(d['unknown_terms'])}")
        for term, why in d["ignored_terms"].items():
            err.print(f"{named.get(term, term)} ({term}) not counted: {why}", highlight=False)
        for term, now in d["replaced_terms"].items():
            err.print(f"{term} is obsolete, counted as {', '.join(now)}")
        if d["unknown_genes"]:
            err.print(f"no disease in the graph is associated with {', '.join(d['unknown_genes'])}: ignored")
        if d["genes"]:
            err.print(f"only the diseases associated with {', '.join(d['genes'])}")
        if said := Patient(**d["patient"]).describe():
            err.print(f"{said[0].upper()}{said[1:]}: X- and Y-linked diseases and later onsets weighed")
        if not d["diseases"]:  # only a namespace or the genes leave nothing (or a graph without annotations)
            where = f" in {', '.join(namespaces)}" if namespaces else ""
            where += f" among the diseases of {', '.join(d['genes'])}" if d["genes"] else ""
            out.print(f"no disease ranked{where or ': the graph has no phenotype annotations'}", highlight=False)
        for i, row in enumerate(d["diseases"], 1):
            genes = ", ".join(row["genes"][:5]) or "-"
            out.print(f"[bold]{i}. {row['name']}[/] ({row['disease']})  score {row['score']}  genes: {genes}")
            for q, t, s in row["matches"]:
                observed_name, annotated = d["term_names"].get(q, q), d["term_names"].get(t, t)
                out.print(f"   {observed_name} ({q}) ~ {annotated} ({t})  [{s}]", highlight=False)
            matched = {q for q, _, _ in row["matches"]}
            for q, t, s in row.get("semantic_matches", []):  # close in meaning, no ancestor shared below the roots
                if q not in matched:
                    observed_name, annotated = d["term_names"].get(q, q), d["term_names"].get(t, t)
                    line = f"   {observed_name} ({q}) ≈ {annotated} ({t})  (cosine {s})"
                    out.print(line, highlight=False, markup=False)
            for reason in row["contradictions"][:3]:
                out.print(f"   [yellow]{reason}[/]", highlight=False)
            if row["pmids"]:
                out.print(f"   PMIDs: {', '.join(row['pmids'][:6])}", highlight=False)

    emit(data, as_json, render)


def report(
    file: Annotated[Path | None, typer.Argument(help="The study: a DICOM file.", dir_okay=False)] = None,
    indication: Annotated[str, typer.Option(help="Why the study was done, e.g. 'chest pain, dyspnea'.")] = "",
    image_id: Annotated[str | None, typer.Option(help="An indexed study (IMG:...) instead of a file.")] = None,
    findings: Annotated[
        str, typer.Option(help="The study's own findings, if you have them: they choose the priors and the impression.")
    ] = "",
    k: Annotated[int, typer.Option(min=1, max=20, help="Prior reports to draw on.")] = 5,
    mode: Annotated[str, typer.Option(help="auto (LLM when configured), extractive or llm.")] = "auto",
    fhir: Annotated[bool, typer.Option("--fhir", help="Print a FHIR R4 DiagnosticReport (JSON).")] = False,
    sr: Annotated[
        Path | None,
        typer.Option(
            "--sr", help="Also write the draft as a DICOM Structured Report in the file's study.", dir_okay=False
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help="Also store that structured report on a DICOMweb server (its root; STOW-RS)."),
    ] = None,
    pacs: Annotated[
        str | None,
        typer.Option("--pacs", help="Draft for a study on this DICOMweb server (its root), named by --study."),
    ] = None,
    study: Annotated[str | None, typer.Option("--study", help="With --pacs: the Study Instance UID.")] = None,
    user: Annotated[str | None, typer.Option(envvar="MEDKG_DICOMWEB_USER", help="DICOMweb basic auth user.")] = None,
    password: Annotated[
        str | None, typer.Option(envvar="MEDKG_DICOMWEB_PASSWORD", help="DICOMweb basic auth password.")
    ] = None,
    token: Annotated[str | None, typer.Option(envvar="MEDKG_DICOMWEB_TOKEN", help="DICOMweb bearer token.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Draft a radiology report (technique, findings, impression) from the most similar prior studies
    and reports and knowledge-graph facts about the indication, every sentence cited. The study: a DICOM
    file, an indexed study (--image-id), or a study on a PACS (--pacs URL --study UID); for a file or a
    PACS study the draft can go back into its study as a DICOM SR (--sr FILE, --store URL)."""
    import io

    import pydicom

    from kg.errors import InvalidInput
    from multimodal.dicom import DicomError, read_dicom
    from service.qa.llm import LLMError
    from service.radiology.generator import UnknownImage

    if sum(x is not None for x in (file, image_id, pacs)) != 1:
        raise fail("give one study: a DICOM file, --image-id, or --pacs with --study")
    if bool(pacs) != bool(study):
        raise fail("--pacs and --study go together: the server's DICOMweb root and the Study Instance UID")
    if (sr or store) and image_id:
        raise fail("--sr and --store put the draft into the study of a DICOM file or a PACS study: give the file")
    if mode not in ("auto", "extractive", "llm"):
        raise fail(f"--mode must be auto, extractive or llm, not {mode!r}")
    from ingest.dicomweb import DicomWeb, study_image

    try:
        server = DicomWeb(store, user=user, password=password, token=token) if store else None
        if server is not None:
            server.check()  # before the draft: a wrong address or password fails at once
        source = None  # the study's original data set: what an SR references and takes its study from
        if pacs and study:
            origin = DicomWeb(pacs, user=user, password=password, token=token)
            source = study_image(origin, study)
        elif file is not None:
            if not file.exists():
                raise fail(f"no such file: {file}")
            source = pydicom.dcmread(file, stop_before_pixels=True) if (sr or store) else None
    except InvalidInput as exc:
        raise fail(str(exc)) from None
    except pydicom.errors.InvalidDicomError as exc:
        raise fail(f"{file.name if file else 'the study'}: not a DICOM file ({exc})") from None
    with container() as c:
        image = None
        if pacs and source is not None:
            encoded = io.BytesIO()
            source.save_as(encoded, enforce_file_format=True)
            try:
                image = read_dicom(encoded.getvalue(), c.pseudonymizer)
            except DicomError as exc:
                raise fail(f"the study's image: {exc.reason}") from None
        elif file is not None:
            try:
                image = read_dicom(file, c.pseudonymizer)
            except DicomError as exc:
                raise fail(f"{file.name}: {exc.reason}") from None
        try:
            r = c.report_generator.generate(
                indication,
                image=image,
                image_id=image_id,
                findings=findings or None,
                k=k,
                mode=mode,  # type: ignore[arg-type]
            )
        except UnknownImage:
            raise fail(f"no indexed image {image_id!r} (run `medkg ingest dicom` first)") from None
        except LLMError as exc:
            raise fail(f"the LLM failed ({exc.status}): {exc}", code=3) from None
    if source is not None and (sr or server is not None):
        _structured_report(r, source, sr, server)
    if fhir:
        from service.radiology.fhir import as_diagnostic_report

        print(as_diagnostic_report(r).model_dump_json(exclude_none=True, indent=2))
        return

    def render(d: dict[str, Any]) -> None:
        out.print(f"[bold]INDICATION:[/] {d['indication'] or '-'}", highlight=False, soft_wrap=True)
        out.print(f"[bold]TECHNIQUE:[/] {d['technique']}", highlight=False, soft_wrap=True)
        out.print(f"[bold]FINDINGS:[/] {d['findings'] or '-'}", highlight=False, soft_wrap=True)
        out.print(f"[bold]IMPRESSION:[/] {d['impression'] or '-'}", highlight=False, soft_wrap=True)
        if d["context"]:
            out.print(f"[bold]CLINICAL CONTEXT:[/] {d['context']}", highlight=False, soft_wrap=True)
        label = "insufficient evidence" if d["insufficient_evidence"] else f"confidence {d['confidence']:.2f}"
        out.print(f"[dim]({d['mode']}, {label}; {len(d['priors'])} prior reports)[/]")
        for p in d["priors"]:
            out.print(f"  prior {p['doc_id']} ({p['score']:.2f}, by {' and '.join(p['via'])})", highlight=False)

    emit(r.model_dump(mode="json"), as_json, render)


def _structured_report(r: Any, source: Any, path: Path | None, server: Any) -> None:
    """The draft as a DICOM SR in the study of ``source`` (its original data set): written to ``path``, stored
    on ``server`` (STOW-RS)."""
    from kg.errors import InvalidInput
    from service.radiology.dicom_sr import as_structured_report

    try:
        structured = as_structured_report(r, source)
    except (ValueError, AttributeError) as exc:  # highdicom: the file lacks what an SR's evidence needs
        raise fail(f"the study cannot be referenced from a structured report ({exc})") from None
    if path is not None:
        try:
            structured.save_as(path, enforce_file_format=True)
        except OSError as exc:
            raise fail(f"cannot write {path}: {exc.strerror or exc}") from None
        err.print(f"structured report written to {path}", highlight=False)
    if server is not None:
        try:
            server.store([structured])
        except InvalidInput as exc:
            raise fail(str(exc)) from None
        err.print(f"structured report stored on {server.url} (series {structured.SeriesInstanceUID})", highlight=False)


COMMANDS = [ask, differential, report]
