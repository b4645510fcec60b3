#!/usr/bin/env python3
"""Generate the bundled demo corpus that ``pyhybrid demo`` ingests.

The corpus is hand-written for this project: two tenants that make different
regulated products, so that the same generic question returns clearly different
chunks per tenant.

* ``acme``   - InfuSafe IP-300, a large-volume infusion pump (medical device).
* ``globex`` - StopSure EBC-7, an electronic brake controller for vans (automotive).

Each tenant has requirements (REQ), test protocols (TP), SOPs, deviations (DEV) and
risk items (RISK).  The text tables below are the source of truth; this script only
adds ids, metadata and MENTIONS edges, validates everything and writes:

    pyhybrid/demo_data/{acme,globex}_chunks.jsonl
    pyhybrid/demo_data/{acme,globex}_edges.jsonl
    pyhybrid/demo_data/queries.json

Conventions used in the tables:

* The first sentence of a document's first chunk is "<CODE> <title>."; the title
  metadata is taken from it.
* ``restricted=`` lists chunk positions that carry ``acl_labels: ["quality"]``.
* ``lang="de"`` marks a German document; a German translation of an English
  document gets the English code plus ``-DE`` (e.g. SOP-004-DE).
* Edges are written one per line as ``SRC REL DST`` without the tenant prefix;
  chunk references are ``CODE#position``, entity references ``entity:<name>``.
  MENTIONS edges (chunk -> entity) are added from the ENTITIES keyword tables.
* Test protocol TP-031 of each tenant deliberately avoids the vocabulary of the
  requirement it verifies (REQ-012): it is meant to be found through the
  VERIFIES edge, not by text.

Run:  python tools/make_demo_data.py           (write files and validate)
      python tools/make_demo_data.py --check   (validate the files on disk only)
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent.parent / "pyhybrid" / "demo_data"

DOC_TYPES = {
    "REQ": "requirement",
    "TP": "test_protocol",
    "SOP": "sop",
    "DEV": "deviation",
    "RISK": "risk",
}

SECTIONS = {
    "requirement": ["statement", "conditions"],
    "test_protocol": ["objective and setup", "procedure", "acceptance criteria"],
    "sop": ["purpose and scope", "procedure", "records and follow-up"],
    "deviation": ["description", "investigation and disposition"],
    "risk": ["risk item"],
}

RELATIONS = {"VERIFIES", "SPECIFIED_BY", "IMPACTED_BY", "MITIGATES", "REFERENCES", "MENTIONS"}

# Which document types each relation connects (source -> destination); "entity" for entity ids.
REL_TYPES = {
    "VERIFIES": ({"test_protocol"}, {"requirement"}),
    "SPECIFIED_BY": ({"requirement"}, {"requirement", "sop"}),
    "IMPACTED_BY": ({"requirement", "test_protocol"}, {"deviation"}),
    "MITIGATES": ({"requirement"}, {"risk"}),
    "REFERENCES": ({"sop"}, {"sop"}),
    "MENTIONS": (set(DOC_TYPES.values()), {"entity"}),
}

ACL_LABEL = "quality"
MIN_WORDS, MAX_WORDS = 40, 150
MAX_MENTIONS_PER_CHUNK = 2


def clean(text: str) -> str:
    """Collapse the line breaks and indentation of a triple-quoted table entry."""
    return " ".join(text.split())


@dataclass
class Doc:
    code: str
    chunks: list[str]
    restricted: tuple[int, ...] = ()
    lang: str = "en"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def doc_type(self) -> str:
        return DOC_TYPES[self.code.split("-")[0]]

    @property
    def title(self) -> str:
        first = self.chunks[0]
        head = first.split(". ", 1)[0]
        code_token, _, title = head.partition(" ")
        assert code_token == self.code.removesuffix("-DE"), f"{self.code}: chunk 0 must start with its code"
        assert 3 < len(title) < 100, f"{self.code}: cannot take a title from {head!r}"
        return title


def doc(code: str, *chunks: str, restricted: tuple[int, ...] = (), lang: str = "en", **extra: str) -> Doc:
    return Doc(code, [clean(c) for c in chunks], restricted, lang, dict(extra))


@dataclass
class Tenant:
    name: str
    product: str
    docs: list[Doc]
    edges: str
    entities: dict[str, str]  # entity name -> regular expression (case-insensitive)


# ---------------------------------------------------------------------------
# Tenant "acme": InfuSafe IP-300 large-volume infusion pump
# ---------------------------------------------------------------------------

ACME_REQUIREMENTS = [
    doc("REQ-001", """
        REQ-001 Flow rate range. The InfuSafe IP-300 shall deliver programmed flow rates from 0.1 mL/h
        to 999 mL/h. Below 100 mL/h the rate shall be adjustable in steps of 0.1 mL/h; from 100 mL/h
        upward the step size shall be 1 mL/h. Any attempt to enter a rate outside this range shall be
        rejected at the keypad with an on-screen message stating the permitted limits, and no infusion
        shall start until a valid rate is confirmed."""),
    doc("REQ-002", """
        REQ-002 Flow accuracy. Under nominal conditions the IP-300 shall deliver the programmed volume
        with an accuracy of ±5% across the full flow rate range of 0.1 to 999 mL/h. Accuracy shall be
        evaluated as the mean flow error over the analysis period defined in IEC 60601-2-24, using only
        IS-300 series administration sets. The requirement applies to both primary and secondary
        infusions and to every pump leaving production.""", """
        REQ-002 conditions and rationale. Nominal conditions are an ambient temperature of 20 ± 2 °C,
        a head height of 0 to 50 cm, back pressure between -100 and +100 mmHg, and water or 5% dextrose
        as the test fluid. The ±5% limit shall still be met after 24 h of continuous pumping on the same
        set, which covers fatigue of the silicone pumping segment. The limit matches comparable
        large-volume pumps and the clinical tolerance for critical drips such as vasopressors."""),
    doc("REQ-003", """
        REQ-003 Volume to be infused and end of infusion. The user shall be able to program a volume to
        be infused (VTBI) from 0.1 mL to 9999 mL. The pump shall issue a low-priority pre-alert 5 minutes
        before the VTBI is reached and a medium-priority end-of-infusion alarm when it is reached. After
        the VTBI is complete the pump shall switch to a keep-vein-open (KVO) rate of 1 mL/h, or the
        programmed rate if that is lower, until the user intervenes."""),
    doc("REQ-004", """
        REQ-004 Bolus delivery. The pump shall allow an on-demand bolus with a bolus rate of 1 to
        999 mL/h and a bolus volume of 0.1 to 50 mL, limited by the drug library entry where one is
        selected. The delivered bolus volume shall be within ±5% or ±0.2 mL of the programmed value,
        whichever is greater. A bolus shall never start without a second confirmation keypress, and the
        remaining bolus volume shall be displayed while it runs."""),
    doc("REQ-005", """
        REQ-005 Drug library capacity. The IP-300 shall store a drug library of at least 5000 drug
        entries organised in up to 30 care areas, each entry holding concentration, dosing unit, default
        rate and hard and soft dose limits. The active library version and its release date shall be
        shown on the start-up screen. A library shall only be accepted if its digital signature verifies
        against the certificate of the hospital's library management server."""),
    doc("REQ-006", """
        REQ-006 Dose error reduction. When a programmed dose exceeds a soft limit, the pump shall display
        the limit and the entered value side by side and require an explicit override confirmation,
        which is recorded in the event log. A dose outside a hard limit shall be rejected without any
        possibility of override. Infusions started without a library entry (basic infusions) shall be
        flagged on the running screen with a distinct yellow banner."""),
    doc("REQ-007", """
        REQ-007 Rate titration. The user shall be able to change the flow rate of a running infusion
        without stopping it. The new rate shall take effect within 10 s of confirmation, and the pump
        shall apply the same soft and hard limits as at programming time. Each titration shall be written
        to the event log with the old rate, the new rate, a time stamp and the drug library entry in
        use."""),
    doc("REQ-008", """
        REQ-008 Standby and callback reminder. The pump shall offer a standby state of up to 2 h during
        which no infusion runs and no reminder sounds. If the pump is stopped outside standby with a set
        loaded and there is no user interaction for 2 minutes, it shall issue a low-priority callback
        reminder that repeats until a key is pressed. Remaining standby time shall be displayed in
        minutes."""),
    doc("REQ-009", """
        REQ-009 Nurse call output. The IP-300 shall provide a potential-free nurse call relay on the rear
        connector. The relay shall close within 1 s of any high- or medium-priority alarm condition and
        open again when the condition is resolved or acknowledged. The contact shall be rated for 24 V DC
        at 0.5 A, and the output mode, normally open or normally closed, shall be configurable by
        biomedical engineering only."""),
    doc("REQ-010", """
        REQ-010 Alarm system. The IP-300 shall implement an alarm system conforming to IEC 60601-1-8 with
        three priority levels: high, medium and low. Every alarm condition shall be signalled both
        visually, by a coloured alarm indicator light visible from 4 m, and audibly, using the standard
        melody for its priority. This alarm requirement applies to all technical and physiological alarm
        conditions listed in the alarm matrix AM-300.""", """
        REQ-010 alarm matrix and priority assignment. High priority is reserved for conditions where
        delivery has stopped or harm is imminent: downstream occlusion, air in line, door open during
        infusion, battery depleted and system error. Medium priority covers end of infusion, upstream
        occlusion and low battery. Low priority covers the callback reminder and the end-of-infusion
        pre-alert. The alarm matrix AM-300 is the controlled source for these assignments and shall be
        changed through design change only."""),
    doc("REQ-011", """
        REQ-011 Latching of technical alarms. High-priority technical alarm conditions shall be latching:
        the visual indication shall remain active after the triggering condition disappears, until a user
        acknowledges it on the pump. The cause, the time and the acknowledging user profile shall be
        recorded. Non-latching behaviour is permitted only for the callback reminder and the
        end-of-infusion pre-alert."""),
    doc("REQ-012", """
        REQ-012 Downstream occlusion alarm. The pump shall detect a downstream occlusion between the pump
        and the patient and raise a high-priority alarm within 30 s at a flow rate of 25 mL/h when the
        occlusion pressure threshold is set to its default level. Pumping shall stop at the moment the
        alarm is raised. At 1 mL/h the time to alarm shall not exceed 20 minutes at the lowest threshold
        setting."""),
    doc("REQ-013", """
        REQ-013 Upstream occlusion detection. The IP-300 shall detect an upstream occlusion, such as a
        closed roller clamp above the pump or an empty, unvented glass bottle, and raise a
        medium-priority alarm before 2 mL of the programmed volume has failed to be delivered. Detection
        shall rely on the upstream pressure sensor and shall work for all IS-300 set variants, including
        those with a burette."""),
    doc("REQ-014", """
        REQ-014 Occlusion pressure threshold settings. The downstream occlusion threshold shall be
        selectable in three levels: low (300 mmHg), medium (500 mmHg, the default) and high (900 mmHg),
        with a tolerance of ±100 mmHg at each level. The selected level shall be visible on the running
        screen at all times. Care-area defaults for the threshold shall be configurable in the drug
        library."""),
    doc("REQ-015", """
        REQ-015 Post-occlusion bolus limit. After a downstream occlusion alarm, the pump shall
        automatically reverse the pumping mechanism to relieve line pressure, so that the unintended
        bolus delivered to the patient when the occlusion is released does not exceed 0.5 mL at the high
        threshold setting. Pressure relief shall be complete within 5 s of the alarm."""),
    doc("REQ-016", """
        REQ-016 Air-in-line detection. The pump shall detect air in the administration set downstream of
        the pumping mechanism by means of an ultrasonic air sensor. A single air bubble of 50 µL or larger
        shall trigger a high-priority alarm and stop delivery. In addition, accumulated air of 1.0 mL
        within any 15-minute window, counting bubbles smaller than 50 µL, shall trigger the same
        alarm.""", """
        REQ-016 configuration and rationale. The single-bubble threshold may be lowered to 20 µL for
        neonatal care areas through the drug library, but may not be raised above 50 µL. Bubbles below
        10 µL shall be ignored to avoid nuisance alarms caused by microbubbles from outgassing of cold
        fluids. The limits follow the cumulative air volume considerations of IEC 60601-2-24 and the
        clinical input recorded in the risk management file."""),
    doc("REQ-017", """
        REQ-017 Alarm audibility. The auditory alarm signal for high-priority alarm conditions shall reach
        a sound pressure level of at least 65 dB(A) at 1 m in front of the device, with the volume set to
        maximum. The user-adjustable range shall not allow the level to be reduced below 45 dB(A). The
        minimum volume setting shall be configurable per care area by biomedical engineering."""),
    doc("REQ-018", """
        REQ-018 Alarm escalation. If a medium-priority alarm condition is not acknowledged within
        2 minutes, the pump shall escalate the signal to the high-priority melody and volume. Every
        escalation shall be logged. The escalation delay shall be fixed and not configurable by users, to
        keep the behaviour consistent across wards and between pumps of different software versions."""),
    doc("REQ-019", """
        REQ-019 Audio pause. The user shall be able to pause the auditory alarm signal for a maximum of
        2 minutes; the visual alarm indication shall remain active throughout. If the cause persists when
        the pause expires, the auditory signal shall resume at its previous level. A global audio-off
        state shall not be available on the IP-300 in any configuration."""),
    doc("REQ-020", """
        REQ-020 Battery operating time. When disconnected from mains power, the IP-300 with a new, fully
        charged battery pack shall operate for at least 6 h at a flow rate of 25 mL/h, with the display
        backlight at the default level and wireless communication enabled. The remaining battery time shall be displayed in hours and
        minutes whenever the pump runs on battery power.""", """
        REQ-020 conditions. The 6 h figure applies at an ambient temperature of 20 to 25 °C. At 5 °C the
        pump shall still reach 4 h 30 min under the same load. The battery pack is a 4-cell lithium-ion
        pack of 7.2 V nominal; the run-time estimate shown to the user shall be accurate to within
        ±15 minutes over the last hour of discharge."""),
    doc("REQ-021", """
        REQ-021 Low battery warning. The pump shall raise a medium-priority low-battery alarm when the
        estimated remaining run time falls to 30 minutes, and a high-priority battery-depleted alarm when
        5 minutes remain, after which delivery stops in a controlled manner. Both thresholds are based on
        the current flow rate and shall be recalculated at least once per minute."""),
    doc("REQ-022", """
        REQ-022 Battery charging. When connected to mains power, the IP-300 shall recharge a fully
        discharged battery to 90% of capacity within 8 h while infusing at 25 mL/h, and within 5 h when
        switched off. Charging shall be inhibited when the pack temperature is outside 0 to 45 °C. A
        charging indicator on the front panel shall be lit whenever mains is present."""),
    doc("REQ-023", """
        REQ-023 Mains supply. The pump shall operate from 100 to 240 V AC, 50/60 Hz, with a rated input
        power not exceeding 25 VA. On loss of mains the pump shall switch to battery without interrupting
        delivery and shall display a mains-loss notification; no alarm sound shall be generated for the
        switchover itself. The mains inlet shall accept a standard IEC C13 connector with a retention
        clip."""),
    doc("REQ-024", """
        REQ-024 Free-flow prevention. The administration set shall be protected against free flow
        whenever it is loaded in the pump, including while the door is open. The IS-300 set shall
        incorporate a flow-stop clip that closes automatically when the set is removed, and the pump shall
        not allow the door to be opened unless the clip has engaged. Free flow shall not exceed 1 mL in
        any single-fault condition."""),
    doc("REQ-025", """
        REQ-025 Door open during infusion. Opening the pump door while an infusion is running shall stop
        the pumping mechanism immediately and raise a high-priority alarm within 1 s. Delivery shall not
        resume automatically when the door is closed; the user must confirm a restart. The door position
        shall be monitored by two independent sensors."""),
    doc("REQ-026", """
        REQ-026 Fluid ingress protection. The IP-300 shall meet IPX4 according to IEC 60529 in its normal
        operating position, including when mounted on an IV pole with the pole clamp. Spilled infusion
        fluids, including 50% glucose, shall not impair function after drying and cleaning according to
        the instructions for use."""),
    doc("REQ-027", """
        REQ-027 Mechanical robustness. The pump shall remain safe and functional after free fall from
        1.0 m onto a hardwood surface in each of six orientations, and after the pole clamp is subjected
        to a static pull of 100 N. After a drop, any damage that could impair delivery accuracy shall be
        detected by the power-on self-test."""),
    doc("REQ-028", """
        REQ-028 Operating and storage environment. The pump shall meet all performance requirements at
        ambient temperatures from 5 to 40 °C, relative humidity from 15 to 90% non-condensing, and
        atmospheric pressure from 700 to 1060 hPa. Storage and transport conditions are -20 to +60 °C and
        up to 95% relative humidity."""),
    doc("REQ-029", """
        REQ-029 Compatibility with cleaning agents. All external surfaces, the keypad membrane and the pole
        clamp shall withstand 500 cleaning cycles with each of the following agents without cracking,
        discolouration or loss of label legibility: 70% isopropyl alcohol, 0.5% sodium hypochlorite and
        quaternary ammonium wipes. The validated agents and the method shall be stated in the
        instructions for use."""),
    doc("REQ-030", """
        REQ-030 Electromagnetic compatibility. The IP-300 shall comply with IEC 60601-1-2 edition 4.1 for
        the professional healthcare facility environment. During radiated immunity testing at 10 V/m and
        proximity field testing at the levels of table 9, flow accuracy shall remain within the limits of
        REQ-002, and no false alarm or loss of alarm function shall occur."""),
    doc("REQ-031", """
        REQ-031 Event log. The pump shall keep a non-volatile event log of at least 10 000 events,
        including programming, alarms, acknowledgements, titrations and power events, each with a time
        stamp resolved to 1 s. The log shall be retained without mains or battery power for at least
        10 years and shall be exportable by service personnel over the service port."""),
    doc("REQ-032", """
        REQ-032 Wireless network security. The Wi-Fi interface shall support WPA2-Enterprise with
        EAP-TLS, and all connections to the hospital server shall use TLS 1.2 or later with mutual
        certificate authentication. Pump certificates shall be renewable without a service visit. No
        listening network port other than the secured server channel shall be open on the device."""),
    doc("REQ-033", """
        REQ-033 Software safety classification. The pump software shall be developed as software safety
        class C according to IEC 62304. Software items controlling the motor, the alarms and dose
        calculations shall have documented unit verification with 100% statement and branch coverage,
        and every anomaly found after release shall be evaluated through the problem resolution
        process."""),
    doc("REQ-034", """
        REQ-034 Display legibility. Flow rate, drug name and alarm messages on the main display shall be
        legible from 2 m by a user with normal or corrected vision at ambient illuminance from 10 to
        1000 lux. The rate digits shall have a character height of at least 9 mm. In night mode the
        backlight shall dim to 20%, but the alarm indicator light shall keep full intensity."""),
    doc("REQ-035", """
        REQ-035 Keypad lock. The pump shall offer a keypad lock that prevents changes to the infusion
        program. Unlocking shall require a four-digit clinician code configurable per care area. Stopping
        the infusion and pausing the auditory alarm signal shall remain possible while the keypad is
        locked, and the lock state shall be shown by a padlock symbol on the running screen."""),
    doc("REQ-036", """
        REQ-036 Size and weight. The IP-300 including battery and pole clamp shall weigh no more than
        2.5 kg and fit within an envelope of 140 × 200 × 230 mm. Up to four pumps shall be stackable on a
        single pole using the rail system, without tools, and a stack shall be removable from the pole in
        one piece for patient transport."""),
    doc("REQ-037", """
        REQ-037 Independent safety monitoring. A safety processor independent of the main controller
        shall supervise motor speed and alarm output. If the main controller fails to service the
        watchdog, or reports a motor speed that deviates from the commanded speed by more than 10%, the
        safety processor shall stop the motor within 1 s and activate the high-priority alarm indicator
        through its own driver."""),
    doc("REQ-038", """
        REQ-038 Secondary infusion. The pump shall support a secondary (piggyback) infusion with its own
        rate and volume. When the secondary volume is complete the pump shall automatically return to the
        primary rate and sound a low-priority notification. Both infusions shall be shown separately in
        the event log and on the running screen."""),
    doc("REQ-039", """
        REQ-039 Usability validation. Critical tasks identified in the use-related risk analysis,
        including set loading, programming a weight-based dose and responding to an occlusion alarm,
        shall be validated in a summative usability test with at least 15 representative users per user
        group. No use error on a critical task may remain unmitigated at market release."""),
    doc("REQ-040", """
        REQ-040 Labelling and UDI. The rear label shall carry the manufacturer, model, serial number,
        rated supply, IP code, and the Unique Device Identifier in both human-readable and GS1 DataMatrix
        form. Labels shall remain legible after the cleaning cycles defined for REQ-029 and shall be
        printed on polyester stock rated for 10 years."""),
]

ACME_TEST_PROTOCOLS = [
    doc("TP-030", """
        TP-030 Alarm system verification. Objective: this protocol verifies the alarm requirement REQ-010
        and the priority assignments in alarm matrix AM-300. Each alarm condition in the matrix is
        provoked on three production-equivalent IP-300 units, and the visual and auditory signals are
        compared with IEC 60601-1-8. Equipment: class 1 sound level meter, light meter, high-speed camera
        at 240 frames per second, and a supply of IS-300 administration sets.""", """
        TP-030 procedure. For each row of AM-300, provoke the condition using the method listed in
        annex A of the protocol, for example by opening the door during infusion or by disconnecting
        mains with a depleted battery. Record the indicator colour, the flashing frequency, the melody
        pattern and the time from provocation to first signal. Repeat every condition three times per
        unit. Photograph the display for each condition and attach the images to the raw data sheet.""", """
        TP-030 acceptance criteria. High-priority signals flash red at 1.4 to 2.8 Hz, medium-priority
        signals flash yellow at 0.4 to 0.8 Hz, and low-priority signals are constant yellow. Melodies
        match the IEC 60601-1-8 patterns for each priority, and the indicator is identifiable at 4 m.
        Result of run 2 (March 2024): all 17 conditions passed on all units; one observation on sound
        level was raised as DEV-008."""),
    # TP-031 verifies REQ-012 but deliberately shares almost no words with it (graph demo).
    doc("TP-031", """
        TP-031 Pressure ramp response with patient-side clamp. Objective: measure how long the IP-300
        takes to announce a blocked delivery line and to halt the peristaltic fingers, starting from an
        unobstructed line at the standard test rate of 25 mL/h. Setup: device under test on a pole at
        bench height, IS-300 set primed with water, a 20 mL syringe barrel as compliance reservoir, an
        inline transducer 40 cm below the cassette, and a haemostat ready on the patient-side
        tubing.""", """
        TP-031 procedure. Run the device for 10 minutes to reach steady delivery. Close the haemostat on
        the patient-side tubing and start a stopwatch at the same instant. Log the transducer reading
        every second to plot the pressure ramp. Stop the stopwatch when the red indicator begins to flash
        and the tone sounds, then note the transducer value at that moment. Release the haemostat, let
        the line relax for 2 minutes and repeat, ten trials on each of three units, at medium
        sensitivity.""", """
        TP-031 acceptance criteria. Each of the 30 trials shall show an announcement latency of no more
        than 30 seconds from haemostat closure, and the fingers shall be stationary when the announcement
        begins, confirmed by the encoder trace. The transducer value at announcement shall lie between
        400 and 600 mmHg. Latency results from the 2024 run: mean 17.8 s, maximum 24.1 s, all units
        passed. Stopwatch readings were cross-checked against the data logger time base."""),
    doc("TP-032", """
        TP-032 Upstream occlusion test. Objective: demonstrate that the pump recognises a blocked supply
        above the cassette before a clinically relevant volume is missed. Setup: IP-300 with IS-300 set,
        a 1000 mL saline bag hung 60 cm above the pump, a roller clamp on the upstream tubing, a
        gravimetric balance under the outlet, and an unvented 500 mL glass bottle for the second
        scenario.""", """
        TP-032 procedure. Scenario A: infuse at 100 mL/h for 5 minutes, then close the upstream roller
        clamp fully. Record the balance reading at the moment of closure and when the alarm sounds.
        Scenario B: replace the bag with the unvented glass bottle and infuse at 200 mL/h until the
        vacuum stops the flow. Run each scenario five times on three units, plus once with the burette
        variant of the set.""", """
        TP-032 acceptance criteria. The volume not delivered between the obstruction and the
        medium-priority alarm shall be less than 2 mL, calculated as programmed volume minus the volume
        derived from the balance. No false upstream alarm may occur during the 5-minute baseline. All
        33 runs passed; the largest shortfall was 1.3 mL in scenario B with the burette set."""),
    doc("TP-033", """
        TP-033 Post-occlusion bolus measurement. Objective: quantify the fluid released towards the
        patient when a blocked line is opened again after the pump has stopped on a downstream occlusion
        alarm, at the high threshold of 900 mmHg. Setup: IP-300, IS-300 set, a three-way stopcock at the
        distal end, a collection vial on an analytical balance with 0.1 mg resolution, and a pressure
        transducer teed in upstream of the stopcock.""", """
        TP-033 procedure. Infuse at 25 mL/h into the vial until the flow is stable. Turn the stopcock to
        the closed position and wait for the alarm and the automatic back-off of the pumping mechanism.
        Wait a further 5 s, tare the balance, then reopen the stopcock to the vial and record the mass
        collected over 60 s. Repeat at 1, 25 and 500 mL/h, five times each, on three units.""", """
        TP-033 acceptance criteria. The bolus volume on release shall be 0.5 mL or less in every run at
        the high threshold. The pressure trace shall show line pressure below 100 mmHg within 5 s of the
        alarm. Results: maximum bolus 0.31 mL at 500 mL/h; pressure relief completed in 2.2 s on
        average. The protocol verifies REQ-015 and provides evidence for the mitigation of RISK-008."""),
    doc("TP-034", """
        TP-034 Air-in-line detection test. Objective: verifies REQ-016, the single-bubble and cumulative
        air thresholds, using calibrated bubble injection. Setup: IP-300 with IS-300 set, a precision
        microlitre syringe connected through a Y-site below the cassette, a backlit camera above the
        ultrasonic sensor window, and water at 20 °C as well as a 20% lipid emulsion as test
        fluids.""", """
        TP-034 procedure. For single-bubble testing, inject bubbles of 45, 50 and 60 µL at 100 mL/h and
        note whether the pump stops before the bubble leaves the sensor window. For cumulative testing,
        inject 40 µL bubbles at 1-minute intervals and record the count at which the alarm is raised.
        Repeat the sequence with the lipid emulsion to check for false detections caused by the opaque
        fluid. Use the neonatal profile (20 µL) for a final series.""", """
        TP-034 acceptance criteria. Every bubble of 50 µL or larger, or 20 µL in the neonatal profile,
        triggers a high-priority alarm while the bubble is still in the sensor window. Bubbles of 45 µL
        do not trigger a single-bubble alarm. The cumulative alarm occurs at or before 1.0 mL within
        15 minutes. Zero false alarms over 8 h with lipid emulsion. Note: the lipid series failed on the
        first build and was repeated after the fix for DEV-004."""),
    doc("TP-035", """
        TP-035 Gravimetric delivery accuracy (trumpet curve). Objective: establish the mean delivery error
        of the IP-300 together with the start-up and trumpet curves defined by the particular standard
        for infusion pumps. Setup: analytical balance with 0.1 mg resolution calibrated per SOP-006, an
        evaporation trap with an oil layer in the beaker, data acquisition at 30 s intervals, degassed
        water at 20 ± 2 °C, and new IS-300 sets for each unit.""", """
        TP-035 procedure. Program 1, 25 and 999 mL/h in separate runs on each of five units. Record the
        balance mass every 30 s for 2 h at the intermediate rate and for the durations set by the
        standard at the other rates; at the intermediate rate continue on the same set to 24 h and record
        the final hour again. Compute the trumpet curve for observation windows of 2, 5, 11, 19 and
        31 minutes, applying density correction for water at the measured temperature.""", """
        TP-035 acceptance criteria. The mean delivery error over the analysis period shall be within ±5%
        at every tested rate, both in the second hour and in hour 24. Trumpet curve maxima and minima are
        reported for information. Results of the 2024 campaign: error between -3.1% and +2.4% at
        25 mL/h, and -4.2% at 1 mL/h after 24 h. One run was invalidated because of the balance issue
        recorded as DEV-002."""),
    doc("TP-036", """
        TP-036 Battery run-time test. Objective: measure how long a new IP-300 runs on its internal pack
        at the reference load, and check the accuracy of the remaining-time display. Setup: five units
        with new packs from two cell lots, a climatic chamber at 22 °C and a second run at 5 °C, Wi-Fi
        connected to the test access point, backlight at default, and a data logger recording pack
        voltage and displayed remaining time every minute.""", """
        TP-036 procedure. Charge each pack to 100% with the pump switched off, then condition it for 2 h
        in the chamber. Disconnect mains, start infusing water at 25 mL/h into a waste container and start
        the logger. Do not touch the keypad except to acknowledge notifications. Record the time of the
        medium-priority warning, the time of the depletion alarm and the time of shutdown. Repeat at 5 °C
        with a fresh set of charged packs.""", """
        TP-036 acceptance criteria. Run time to the depletion alarm at least 6 h 00 min at 22 °C and at
        least 4 h 30 min at 5 °C. Displayed remaining time within ±15 minutes of the actual value during
        the last hour. The initial execution in April 2024 failed on units with cells from lot C-2211;
        see DEV-007. The re-test with the replacement lot passed with a minimum of 6 h 41 min at
        22 °C."""),
    doc("TP-037", """
        TP-037 Low battery warning verification. Objective: verifies REQ-021, confirming that the warning
        and depletion thresholds are computed from the actual consumption at different rates. Setup:
        IP-300 powered from a programmable DC source that emulates the battery pack through the service
        adapter, with the pack emulation model loaded, and an IS-300 set running into a waste
        beaker.""", """
        TP-037 procedure. Infuse at 5, 25 and 500 mL/h in turn. Step the emulated state of charge down in
        1% decrements every 30 s and record the displayed remaining time. Note the exact point when the
        medium-priority warning is raised and when the high-priority depletion alarm follows. Change the
        rate from 25 to 500 mL/h at 40 minutes remaining to confirm that the estimate is recalculated
        within one minute.""", """
        TP-037 acceptance criteria. Warning raised at 30 ± 2 minutes of estimated remaining time and the
        depletion alarm at 5 ± 1 minutes, for all three rates. After the rate change the estimate updates
        within 60 s. Delivery stops in a controlled manner after the depletion alarm, and the event is
        written to the log. All criteria passed on firmware build 2.3.1."""),
    doc("TP-038", """
        TP-038 Sound pressure measurement of auditory signals. Objective: measure the A-weighted sound
        pressure level of the high-priority melody at the maximum and minimum volume settings. Setup:
        hemi-anechoic room with background noise below 30 dB(A), a class 1 sound level meter on a tripod
        1 m in front of the display at the height of the speaker grille, and the IP-300 standing on a
        wooden table.""", """
        TP-038 procedure. Trigger a high-priority condition by opening the door during infusion. Measure
        LAeq over one complete burst at maximum volume, then at the lowest volume permitted by the default
        care-area profile. Move the meter to 90° left and right of the front axis and repeat. Test five
        units, including two fitted with speakers from the second-source supplier.""", """
        TP-038 acceptance criteria. At maximum volume the level shall be at least 65 dB(A) on the front
        axis; at the lowest user setting it shall not be below 45 dB(A). The spectrum shall show the
        fundamental between 150 and 1000 Hz with at least four harmonics. Result: three units passed at
        68 to 70 dB(A); both units with second-source speakers measured 61 dB(A) and failed, see
        DEV-008."""),
    doc("TP-039", """
        TP-039 Free-flow and door interlock test. Objective: show that no uncontrolled gravity flow
        reaches the patient while the set is being loaded or removed, and that opening the door
        mid-infusion stops delivery at once. Setup: 1 m head height from bag to outlet, IS-300 sets with
        flow-stop clips, a graduated 5 mL cylinder at the outlet, and a door force gauge.""", """
        TP-039 procedure. With the set loaded and the pump stopped, open the door and leave it open for
        10 minutes while collecting any outflow. Remove the set and hold it vertically for 10 minutes.
        For the interlock, start infusing at 999 mL/h, open the door with the force gauge, and read the
        time to the alarm from the event log. Simulate a failed door sensor by disconnecting one of the
        two switches and repeat.""", """
        TP-039 acceptance criteria. Outflow in each free-flow scenario at most 1 mL, including the
        single-fault case of a clip that was not pushed fully home. The door cannot be opened unless the
        clip has engaged. Time from door opening to alarm 1 s or less, with the motor stationary in all
        cases. With one door switch disconnected, the pump reports a system error at start-up. Units with
        the intermittent micro-switch from DEV-003 were excluded."""),
    doc("TP-040", """
        TP-040 Drug library and dose limit test. Objective: exercise the dose error reduction software
        with a library at maximum capacity. Setup: test library LIB-MAX containing 5000 entries in
        30 care areas, signed with the test certificate; a second copy of it with a corrupted signature;
        and a pump connected to the library management server in the test network.""", """
        TP-040 procedure. Load LIB-MAX and confirm that its version and date appear on the start-up
        screen. For ten selected drugs, program doses just inside, at, and just outside the soft and hard
        limits, and attempt to override each limit. Load the library with the corrupted signature and
        note the response. Finally, program a basic infusion without a library entry and check the
        running-screen banner.""", """
        TP-040 acceptance criteria. Soft-limit violations show both values and require an override
        confirmation, which appears in the event log. Hard-limit violations are rejected with no override
        path. The corrupted library is refused and the previous library remains active. Basic infusions
        display the yellow banner. Build 2.2.0 failed because the library schema version did not match;
        this was handled under DEV-006."""),
    doc("TP-041", """
        TP-041 Bolus volume accuracy. Objective: verify the delivered volume of on-demand boluses at low,
        medium and high bolus rates while a background infusion is running. Setup: IP-300 with IS-300
        set, an analytical balance with evaporation trap, the background infusion at 10 mL/h, and a
        second operator to time the keypresses.""", """
        TP-041 procedure. Program boluses of 0.5, 5 and 50 mL at bolus rates of 50, 300 and 999 mL/h. Tare
        the balance at bolus start and read the mass when the pump returns to the background rate,
        subtracting the background contribution. Repeat each combination five times. Attempt to start a
        bolus with a single keypress and note the result.""", """
        TP-041 acceptance criteria. Delivered volume within ±5% or ±0.2 mL of the programmed bolus volume,
        whichever is greater. A bolus never starts without the second confirmation, and the remaining
        bolus volume counts down on screen during delivery. All combinations passed; the worst case was
        +0.14 mL on the 0.5 mL bolus at 999 mL/h."""),
    doc("TP-042", """
        TP-042 Drop and pole clamp test. Objective: confirm safety and function after mechanical shock
        representative of clinical handling. Setup: drop rig with release mechanism, a 50 mm hardwood
        board on concrete, a pull tester for the clamp, and a functional check for before and after
        comparison: a quick delivery check at 100 mL/h, the self-test log and a visual inspection.""", """
        TP-042 procedure. Drop each of three units once from 1.0 m in each of six orientations: front,
        back, both sides, top and bottom. After each drop, power the unit on, record the self-test result
        and any visible damage, and perform the 100 mL/h delivery check over 10 minutes. Mount the unit
        on a 25 mm pole and apply 100 N to the housing for 1 minute in the direction away from the
        pole.""", """
        TP-042 acceptance criteria. No hazardous situation after any drop: no exposed live parts, no loose
        battery and no sharp edges. Either the unit passes the delivery check within ±5%, or the
        self-test detects the damage and blocks infusion. The clamp does not slip more than 5 mm under
        100 N. All three units passed; one cracked door hinge was correctly detected by the
        self-test."""),
    doc("TP-043", """
        TP-043 Chemical resistance of enclosure materials. Objective: demonstrate that the housing, keypad
        membrane, labels and pole clamp tolerate repeated wiping with the disinfectants named in the
        instructions for use. Setup: six housings in the final colour, wipes pre-saturated with 70%
        isopropyl alcohol, 0.5% sodium hypochlorite or a quaternary ammonium compound, a gloss meter and
        a label rub tester.""", """
        TP-043 procedure. Wipe each surface with a fresh wipe for 10 s at a pressure of about 10 N, let
        it air dry for 5 minutes, and repeat for 500 cycles per agent, two housings per agent. After
        every 100 cycles inspect under 2× magnification for crazing around the screw bosses and the pole
        clamp, measure gloss, and rub-test the labels. Keep the keypad powered and check key function
        after the final cycle.""", """
        TP-043 acceptance criteria. No cracks or crazing visible at 2× magnification, gloss loss below
        20%, labels fully legible, all keys functional. Results: passed for all three agents. A
        subsequent exploratory run with accelerated hydrogen peroxide wipes, which are not listed in the
        instructions for use, produced stress cracking near the screw bosses; this was logged as
        DEV-009."""),
    doc("TP-044", """
        TP-044 Safety processor supervision test. Objective: show that the independent supervisor halts
        the motor when the main controller stops responding or commands an incorrect speed. Setup: IP-300
        engineering unit with the debug header fitted, a fault-injection build of the main firmware, an
        oscilloscope on the motor drive enable line and on the alarm LED driver, and an encoder
        simulator.""", """
        TP-044 procedure. Case 1: halt the main controller with the debugger during infusion at
        500 mL/h. Case 2: inject a fault that stops the watchdog service while the motor runs. Case 3:
        use the encoder simulator to report a motor speed 12% above command. Case 4: report 8% above
        command as a negative control. Capture the time from fault injection to the motor enable line
        going low and to the alarm LED switching on.""", """
        TP-044 acceptance criteria. In cases 1 to 3 the motor enable line goes low within 1.0 s and the
        red indicator is driven by the supervisor. In case 4 no intervention occurs. Results: worst case
        0.62 s in case 2. This protocol verifies REQ-037 and is repeated after every change to the
        supervisor firmware, as required by the software release procedure."""),
    doc("TP-045", """
        TP-045 Event log capacity and retention. Objective: confirm that the history memory stores the
        required number of records, wraps correctly when full, and keeps its content without power.
        Setup: IP-300 with a script that generates synthetic events over the service port, a climatic
        chamber for accelerated ageing at 85 °C, and the service export tool.""", """
        TP-045 procedure. Generate 12 000 mixed events and export the log; check that the newest 10 000
        are present in order and that time stamps have 1 s resolution. Remove battery and mains, store
        the unit at 85 °C for 1000 h to simulate long-term retention, reconnect it and export again.
        Compare the two exports byte for byte and keep both files with the raw data.""", """
        TP-045 acceptance criteria. At least 10 000 events present, oldest overwritten first, no gaps in
        sequence numbers, and the two exports identical after the ageing step. The Arrhenius calculation
        in the report shows that 1000 h at 85 °C covers more than 10 years at 25 °C for the flash memory
        part used. Passed on all three units."""),
    doc("TP-046", """
        TP-046 Network security verification. Objective: verify the authenticated, encrypted channel
        between the IP-300 and the hospital server, and the absence of unintended services. Setup:
        isolated test network with a RADIUS server, an enterprise access point, a server with a valid and
        an expired certificate, a port scanner and a packet capture workstation.""", """
        TP-046 procedure. Connect the pump using EAP-TLS and capture the handshake. Attempt connections
        with TLS 1.0 and 1.1 forced on the server side, then present the expired server certificate. Run
        a full TCP and UDP port scan against the pump. Renew the pump certificate through the server and
        check that the new certificate is used at the next connection without a service visit.""", """
        TP-046 acceptance criteria. Only TLS 1.2 or 1.3 sessions are established; downgrade attempts and
        the expired certificate are rejected and logged. The port scan shows no open ports. Certificate
        renewal succeeds remotely. Passed, with a recommendation to make TLS 1.3 the default in the next
        release and to shorten the certificate lifetime to one year."""),
    doc("TP-047", """
        TP-047 Climatic and splash test. Objective: confirm delivery performance at the climatic extremes
        of the operating range and resistance to splashing water. Setup: climatic chamber, gravimetric
        balance outside the chamber connected by a short outlet line, an oscillating tube spray apparatus
        per IEC 60529, and 50% glucose for a spill test.""", """
        TP-047 procedure. Run 25 mL/h for 2 h at 5 °C and 15% RH, at 40 °C and 90% RH, and at 700 hPa in
        an altitude chamber. Then mount the pump on a pole and apply the IPX4 spray for 10 minutes while
        infusing. Pour 20 mL of 50% glucose over the top of the housing, allow it to dry for 24 h, clean
        it per the instructions, and repeat the delivery check.""", """
        TP-047 acceptance criteria. Delivery error within ±5% at all climatic points, no water inside the
        enclosure on disassembly after the spray test, and no sticky keys or latch malfunction after the
        glucose spill. Passed at all points; condensation on the display at 40 °C and 90% RH cleared
        within 15 minutes and did not affect legibility."""),
]

ACME_SOPS = [
    doc("SOP-001", """
        SOP-001 Document control. Purpose: defines how quality system documents for the InfuSafe product
        family are created, reviewed, approved, distributed and withdrawn. Scope: requirements
        specifications, test protocols, SOPs, work instructions and forms held in the electronic document
        management system (EDMS). Completed records such as test reports are covered only through their
        templates.""", """
        SOP-001 procedure. The author drafts the document from the current template and assigns reviewers
        according to the review matrix. Approval requires the document owner and Quality Assurance;
        protocols also need a second technical reviewer. On approval the EDMS assigns the effective date,
        normally 10 working days later to allow for training. Superseded versions are watermarked
        obsolete and remain retrievable for at least 15 years.""", """
        SOP-001 responsibilities and records. Document owners review their documents every 3 years or
        after any related CAPA. QA maintains the master list and checks quarterly for overdue reviews.
        Printed copies are uncontrolled unless stamped in red. Training completion is tracked in the
        learning management system and must be recorded before the effective date."""),
    doc("SOP-002", """
        SOP-002 Corrective and preventive action (CAPA). Purpose: establishes the process to investigate
        the causes of existing or potential nonconformities and to take action that prevents their
        recurrence or occurrence. Inputs include complaints, deviations, audit findings, trend reports,
        service data and field safety information for all InfuSafe products.""", """
        SOP-002 procedure. A CAPA is opened in the quality system within 5 working days of the triggering
        event and given a risk-based priority. The owner performs a root cause investigation using 5-Why,
        fishbone or fault tree analysis as appropriate, defines actions with due dates, and submits them
        to the CAPA review board, which meets every two weeks. Actions affecting the design trigger a
        design change under design control.""", """
        SOP-002 effectiveness checks. Every CAPA includes an effectiveness check defined before closure,
        for example no recurrence over 6 months or a process capability index above 1.33. High-priority
        CAPAs are reported monthly to management review. A CAPA may only be closed by QA after the
        effectiveness check has passed and all linked documents are updated."""),
    doc("SOP-003", """
        SOP-003 Complaint handling. Purpose: ensures that every written, electronic or oral communication
        alleging a deficiency of an IP-300 after release is received, documented, evaluated and, where
        required, reported to authorities. The scope includes complaints from hospitals, distributors and
        service technicians, and social media findings forwarded by marketing.""", """
        SOP-003 procedure. Complaints are logged within 1 working day in the complaint database with the
        device serial number, software version and a description of the event. Each complaint is assessed
        for reportability: potential serious incidents under the EU MDR and medical device reports in the
        US are escalated to the regulatory affairs lead the same day. Returned pumps are quarantined and
        their event log is downloaded before any repair.""", """
        SOP-003 investigation and closure. The investigation confirms or rejects the reported failure,
        identifies the probable cause and records whether a CAPA per SOP-002 is required. Complaint trends
        per failure code are reviewed monthly. The complainant receives a written response, and the
        complaint is closed only when all linked actions are complete."""),
    doc("SOP-004", """
        SOP-004 Cleaning and disinfection of the InfuSafe IP-300. Purpose: describes the validated method
        for cleaning and low-level disinfection of the pump between patients and during long-term use.
        Applies to clinical staff and biomedical engineering. Approved agents: 70% isopropyl alcohol,
        0.5% sodium hypochlorite and quaternary ammonium wipes. Do not use hydrogen peroxide products,
        acetone or abrasive pads.""", """
        SOP-004 procedure. Stop the infusion, remove the set and disconnect mains. Wipe the housing,
        keypad and pole clamp with a pre-moistened wipe, paying attention to the door hinge and the
        handle recess; keep the wipe only damp so that no fluid runs into the connector openings. Open
        the door and clean the set channel and the air sensor window with a cotton swab. Observe the
        contact time stated by the wipe manufacturer, at least 1 minute, and let the pump air dry.""", """
        SOP-004 inspection and records. After drying, inspect the housing for cracks and the labels for
        legibility; remove cracked pumps from service and send them to biomedical engineering. Record
        each cleaning between patients on the device tag or in the asset system. Never immerse or
        autoclave the pump. Spills of sugar-containing solutions must be cleaned within 24 h to avoid
        sticky door latches."""),
    doc("SOP-005", """
        SOP-005 Handling of deviations and nonconforming product. Purpose: defines how unplanned
        departures from approved procedures, specifications or protocols are recorded, assessed and
        dispositioned. Applies to manufacturing, incoming inspection, verification testing and service.
        Each deviation receives a DEV number from the quality system.""", """
        SOP-005 procedure. The person who detects a deviation records it within 1 working day, with a
        description of what happened, the affected lots, serial numbers or protocol runs, and the
        immediate containment. QA classifies it as minor, major or critical. Major and critical
        deviations require a documented root cause investigation and an impact assessment on product
        already released, and are linked to a CAPA according to SOP-002.""", """
        SOP-005 disposition. Possible dispositions are use as is, rework, re-test, return to supplier and
        scrap. Use as is requires a justification signed by the design authority. Test data affected by a
        deviation may only be used after QA approval. Open deviations older than 30 days are escalated to
        the quality manager at the weekly quality meeting."""),
    doc("SOP-006", """
        SOP-006 Calibration of gravimetric test equipment. Purpose: assures the accuracy of analytical
        balances, thermometers and data loggers used for flow testing of infusion pumps. The scope
        includes the verification laboratory and the end-of-line test stations in production. Equipment
        without a valid calibration label must not be used for release or verification testing.""", """
        SOP-006 procedure. Balances are calibrated every 6 months by an ISO/IEC 17025 accredited provider
        and checked daily with class E2 reference weights of 10 g and 100 g. The daily check passes if the
        reading is within ±0.2 mg of the nominal value. Thermometers are compared monthly against the
        reference probe. Results are entered in the equipment log before any testing starts.""", """
        SOP-006 out-of-tolerance handling. If a calibration finds an instrument out of tolerance, the lab
        manager identifies all tests performed since the last passed calibration and opens a deviation
        per SOP-005 to assess their validity. The instrument is tagged do not use until it has been
        repaired and recalibrated. Calibration certificates are stored for 15 years."""),
    doc("SOP-007", """
        SOP-007 Preventive maintenance of the IP-300. Purpose: defines the annual maintenance performed by
        biomedical engineering or Acme service. Scope: all IP-300 pumps in clinical use and in loan
        pools. The maintenance interval is 12 months or 5000 operating hours, whichever comes first; the
        battery pack is replaced every 3 years regardless of its condition.""", """
        SOP-007 procedure. Inspect the housing, door, hinge and pole clamp. Run the built-in service
        self-test. Perform a delivery check at 100 mL/h for 30 minutes against a calibrated balance as
        described in SOP-006. Check the downstream pressure calibration with the service pressure gauge at
        500 mmHg. Run a battery capacity test: from full charge, infuse at 25 mL/h until the low-battery
        warning and record the time.""", """
        SOP-007 acceptance and records. Delivery within ±5%, pressure reading within ±50 mmHg, and battery
        time to warning at least 5 h 30 min; otherwise replace the pack. Clean the pump per SOP-004 before
        returning it to service. Record results in the service record with the pump serial number and
        apply a maintenance label showing the next due date."""),
    doc("SOP-008", """
        SOP-008 Software release and configuration management. Purpose: governs the build, verification
        and release of IP-300 firmware and of the drug library editor according to IEC 62304. Each
        release is identified by a semantic version and a build hash and is produced on the controlled
        build server only; builds from developer workstations are never released.""", """
        SOP-008 procedure. A release candidate is built from a tagged commit. The regression test suite,
        static analysis and unit tests must pass, and the anomaly list is reviewed for unresolved items
        with a safety impact. The release note lists changes, known anomalies and the compatible drug
        library schema versions. Release requires approval by the software lead, QA and regulatory
        affairs.""", """
        SOP-008 records. The build server archives the binaries, the compiler version and the software
        bill of materials of each release. Release records are kept for the lifetime of the device plus
        10 years. Field updates are distributed only as signed packages and are logged per pump serial
        number in the service database."""),
    doc("SOP-009", """
        SOP-009 Supplier audit programme (confidential). Purpose: describes how Acme qualifies and audits
        critical suppliers, including the battery cell supplier, the silicone tubing extruder for IS-300
        sets and the contract PCB assembler. This document contains supplier ratings and audit findings
        and is restricted to the quality department.""", """
        SOP-009 audit procedure. Critical suppliers are audited on site every 2 years and after any major
        deviation traced to their product. The audit checklist covers change control, traceability,
        process validation and cleanroom monitoring. Findings are rated minor, major or critical; a
        critical finding blocks new purchase orders until it is closed. The 2024 audit of the cell
        supplier raised two major findings on lot traceability.""", """
        SOP-009 supplier scorecard. Suppliers are scored quarterly on delivered quality (ppm), on-time
        delivery and responsiveness to corrective action requests. A score below 70 triggers a supplier
        CAPA under SOP-002. The current scorecard rates the tubing extruder at 82, the PCB assembler at 91
        and the battery cell supplier at 64, which is under enhanced surveillance.""",
        restricted=(0, 1, 2)),
    doc("SOP-010", """
        SOP-010 Risk management procedure. Purpose: implements ISO 14971 for the InfuSafe product family.
        The risk management file contains the risk management plan, the hazard analysis, the use-related
        risk analysis, the design FMEA, the risk control verification records and the risk management
        report. Each risk item carries a RISK number.""", """
        SOP-010 procedure. Severity is rated on five levels from negligible to catastrophic, and the
        probability of occurrence on five levels from improbable to frequent. Risks in the unacceptable
        region of the matrix must be reduced by risk control measures in this order: inherent safety by
        design, protective measures, information for safety. Each control measure is traced to a
        requirement and to its verification.""", """
        SOP-010 review. The risk management file is reviewed at each design phase gate and at least
        annually after launch, using post-market data from complaints and service. New hazards found in
        the field are added within 30 days. The overall residual risk is weighed against the clinical
        benefit in the risk management report signed by the medical director."""),
    # German translation of SOP-004 (lang "de")
    doc("SOP-004-DE", """
        SOP-004 Reinigung und Desinfektion der InfuSafe IP-300 (deutsche Fassung). Zweck: beschreibt das
        validierte Verfahren zur Reinigung und Desinfektion der Pumpe zwischen zwei Patienten und bei
        Langzeitanwendung. Zugelassene Mittel: Isopropanol 70 %, Natriumhypochlorit 0,5 % und Tücher mit
        quartären Ammoniumverbindungen. Keine Wasserstoffperoxid-Produkte, kein Aceton und keine
        Scheuerschwämme verwenden.""", """
        SOP-004 Durchführung. Infusion stoppen, Infusionsbesteck entnehmen und Netzstecker ziehen.
        Gehäuse, Tastatur und Stativklemme mit einem feuchten Tuch abwischen, dabei besonders auf
        Türscharnier und Griffmulde achten. Die Tür öffnen und den Schlauchkanal sowie das Fenster des
        Luftsensors mit einem Wattestäbchen reinigen. Eine Einwirkzeit von mindestens 1 Minute einhalten
        und die Pumpe an der Luft trocknen lassen. Pumpen mit Rissen im Gehäuse der Medizintechnik
        melden.""", lang="de", translation_of="SOP-004"),
]

ACME_DEVIATIONS = [
    doc("DEV-001", """
        DEV-001 IS-300 tubing wall thickness out of specification. During incoming inspection of set lot
        23-0412, silicone pumping segments measured 0.86 to 0.88 mm wall thickness against a
        specification of 0.90 ± 0.02 mm. 2400 sets were placed in quarantine. Status: closed.
        Classification: major, because the pumping segment geometry directly affects the delivered
        volume.""", """
        DEV-001 root cause and disposition. The extruder changed its die tooling without notification, a
        breach of the quality agreement. Impact assessment: gravimetric testing of 20 sets from the lot
        showed a delivery error of +6.1% at 25 mL/h, outside the flow accuracy limit. Disposition: lot
        returned to the supplier. A supplier corrective action was requested and is followed up in the
        supplier audit programme; the incoming inspection sample size was raised from 13 to 32."""),
    doc("DEV-002", """
        DEV-002 Expired balance calibration during a verification run. On 12 February 2024 the second run
        of the gravimetric accuracy protocol was performed on balance BAL-07, whose calibration had
        expired on 9 February. The technician noticed the expired label after the run was complete.
        Status: closed. Classification: minor.""", """
        DEV-002 investigation and disposition. The daily reference weight checks on 12 February were
        within ±0.1 mg, and the subsequent calibration found the balance in tolerance. Nevertheless the
        affected run was invalidated and repeated on balance BAL-03. Root cause: the calibration due list
        was not filtered for the verification lab. Action: instruments are now locked out in the lab
        booking system when their calibration is overdue."""),
    doc("DEV-003", """
        DEV-003 Intermittent door micro-switch. Final assembly test found 7 of 310 pumps from week 18
        that occasionally reported the door as open while it was closed and latched. The condition
        produced a high-priority alarm and stopped delivery, a fail-safe but nuisance behaviour that
        would disturb clinical users. Status: closed. Classification: major.""", """
        DEV-003 root cause and disposition. X-ray and cross-sections showed cold solder joints on the
        micro-switch terminals, caused by a reflow profile change at the PCB assembler. Impact: no
        released product affected, since all units were caught at final test. Disposition: rework of the
        7 pumps with new switches and a 100% re-test of the week 18 and 19 builds. CAPA-2024-011 adds a
        door-cycling test of 200 cycles to final test."""),
    doc("DEV-004", """
        DEV-004 False air detection with lipid emulsions. During verification, pumps infusing a 20% lipid
        emulsion produced repeated air-in-line alarms without any visible air in the tubing. The
        ultrasonic signal amplitude dropped close to the detection threshold because of the high
        attenuation of the emulsion. Status: closed. Classification: major.""", """
        DEV-004 root cause and disposition. The detection algorithm used a fixed amplitude threshold
        calibrated with water only. A firmware change introduced an adaptive baseline that tracks the
        fluid attenuation over 30 s while keeping the 50 µL bubble sensitivity. Impact: no product in the
        field, as the issue was found before release. Re-verification with water, saline, blood and lipid
        emulsions passed."""),
    doc("DEV-005", """
        DEV-005 UDI label misprint. A batch of 600 rear labels was printed with a GS1 DataMatrix code that
        encoded the wrong device identifier, that of the IP-300 demonstration unit variant. The
        human-readable text was correct. The error was detected by a hospital's incoming scanner after
        42 pumps had been shipped. Status: closed. Classification: major.""", """
        DEV-005 root cause and disposition. The label template in the print system referenced the wrong
        master data record after an update. Impact: traceability only, no effect on delivery or alarms.
        Disposition: field correction of the 42 pumps by relabelling during a service visit, and scrap of
        the remaining labels. A second operator now verifies the scanned code against the work order at
        the first label of each batch."""),
    doc("DEV-006", """
        DEV-006 Drug library schema mismatch in firmware build 2.2.0. Verification found that build 2.2.0
        accepted a library created with editor version 1.4 but read the concentration unit field one
        column off, so that mg and microgram units were swapped for 11 entries. Found during drug library
        testing; the build was never released. Status: closed. Classification: critical.""", """
        DEV-006 root cause and disposition. The schema version check compared only the major version
        number. Fix: the firmware now rejects any library whose full schema version is not listed as
        compatible in the release note, and the release process requires an explicit compatibility
        statement. Build 2.2.0 was withdrawn from the internal server, and a new unit test covers all
        historical schema versions."""),
    doc("DEV-007", """
        DEV-007 Battery run-time shortfall with cell lot C-2211. During the battery run-time verification
        in April 2024, three of five pumps fitted with packs from cell lot C-2211 reached the depletion
        alarm after 3 h 52 min to 4 h 05 min at 5 °C, below the required 4 h 30 min. Status: closed.
        Classification: major.""", """
        DEV-007 root cause, impact and disposition. At 22 °C the same packs reached only 5 h 48 min, below
        the 6 h target. Cell teardown and impedance spectroscopy showed an internal resistance 35% above
        the qualified reference lot, caused by a change of electrolyte additive at the cell manufacturer.
        Impact: 180 packs in stock and 64 pumps shipped to two hospitals. Disposition: stock packs
        scrapped, field packs replaced proactively, and incoming capacity testing added; the case fed
        into the supplier audit findings."""),
    doc("DEV-008", """
        DEV-008 Low alarm loudness with second-source speaker. Speakers from the second-source supplier,
        introduced to secure supply, produced only 61 dB(A) at 1 m for the high-priority melody during
        sound pressure testing, compared with 68 to 70 dB(A) for the original part. Status: closed.
        Classification: major.""", """
        DEV-008 root cause and disposition. The second-source speaker has its resonance at 2.4 kHz instead
        of 1.1 kHz, so the fundamental of the melody falls in a region of lower efficiency. A change of
        the driver circuit was rejected; the second source was disqualified and the 2000 speakers in stock
        were returned. The audibility requirement remains verified with the original part only."""),
    doc("DEV-009", """
        DEV-009 Housing stress cracks after hydrogen peroxide wipes. Two hospitals reported fine cracks
        around the rear screw bosses of IP-300 pumps after about one year of use. Both sites use
        accelerated hydrogen peroxide wipes, which are not listed in the instructions for use. Status:
        open, under investigation. Classification: major.""", """
        DEV-009 investigation status. Laboratory exposure reproduced environmental stress cracking of the
        polycarbonate blend with peroxide wipes after 300 cycles, while the approved agents showed none
        after 500. Open question: whether fluid ingress through the cracks can reach the power supply
        board. Interim action: customer letter reminding users of the approved agents. A housing material
        change is being evaluated.""",
        restricted=(0, 1)),
    doc("DEV-010", """
        DEV-010 Downstream pressure sensor drift in field units. Service data from annual maintenance
        showed that 4% of pumps older than 18 months read between 60 and 90 mmHg high at the 500 mmHg
        check point, outside the ±50 mmHg tolerance. A high offset makes the occlusion alarm trigger
        earlier, which is the fail-safe direction, but a negative drift has not been excluded. Status:
        open, under investigation.""", """
        DEV-010 investigation status. Suspected cause: creep of the adhesive that bonds the strain gauge to
        the sensor diaphragm under long-term compression by the set. Returned sensors are being analysed
        by the supplier. The impact assessment on the 30 s alarm time at the default threshold is
        pending. Pumps outside tolerance are recalibrated during maintenance; a field safety notice is not
        considered necessary at present.""",
        restricted=(0, 1)),
    doc("DEV-011", """
        DEV-011 Unexpected safety processor intervention during EMC immunity test. During proximity field
        testing at 28 V/m in the 5.2 GHz band, one engineering unit stopped the motor and raised a system
        error alarm. The unit recovered after a restart. The reaction was safe, but the standard does not
        allow a loss of essential performance. Status: open.""", """
        DEV-011 investigation status. Preliminary analysis suggests that the radio frequency field couples
        into the encoder cable and corrupts the speed feedback seen by the safety processor, which then
        correctly stops the motor. Candidate fixes are a ferrite on the encoder harness and a shielded
        cable. The EMC test report remains in draft until the fix has been verified.""",
        restricted=(0, 1)),
    doc("DEV-012", """
        DEV-012 Particle count excursion in the set assembly cleanroom. On 3 June 2024 the ISO class 7
        cleanroom for IS-300 set assembly exceeded the alert limit for 0.5 µm particles for 40 minutes
        after an HVAC filter change. Production of set lot 24-0603 continued during the excursion.
        Status: open. Classification: major until the product impact is assessed.""", """
        DEV-012 investigation status. Bioburden samples from the lot are within limits; sterilisation
        validation uses a bioburden-based dose, so the product impact is considered low. Pending: a review
        of the filter change work instruction and the decision whether lot 24-0603 can be released after
        additional bioburden testing.""",
        restricted=(1,)),
    # German deviation from the Leipzig service centre (lang "de")
    doc("DEV-013", """
        DEV-013 Abweichung: verkürzte Akkulaufzeit bei Leihpumpen (Servicezentrum Leipzig). Bei der
        jährlichen Wartung von 25 InfuSafe IP-300 aus dem Leihpool erreichten 6 Pumpen die Akkuwarnung
        bereits nach weniger als 5 h 30 min bei 25 mL/h. Alle betroffenen Akkupacks waren älter als
        3 Jahre. Status: abgeschlossen. Einstufung: geringfügig.""", """
        DEV-013 Ursache und Entscheidung. Die Akkupacks im Leihpool wurden nicht nach dem vorgeschriebenen
        Intervall von 3 Jahren getauscht, weil das Wartungssystem das Einbaudatum des Akkus nicht
        erfasste. Maßnahmen: Austausch aller Akkus, die älter als 3 Jahre sind, ein neues Feld für das
        Einbaudatum im Servicebericht und eine Schulung der Servicetechniker nach SOP-007.""", lang="de"),
]

ACME_RISKS = [
    doc("RISK-001", """
        RISK-001 Free flow during set handling. Hazard: over-infusion. Cause: gravity flow through the
        administration set when it is loaded or removed with the roller clamp open, or when the door is
        opened during use. Harm: overdose of potent drugs such as heparin or insulin, potentially fatal.
        Severity: catastrophic. Risk control: automatic flow-stop clip on the set and door interlock;
        residual risk acceptable after verification."""),
    doc("RISK-002", """
        RISK-002 Undetected blockage of the line to the patient. Hazard: under-infusion or interruption of
        therapy. Cause: kinked tubing, a closed clamp or a clotted cannula between pump and patient while
        the pump continues to run without alerting staff. Harm: loss of the therapeutic effect of
        vasoactive or antiarrhythmic drugs, hypotension. Severity: critical. Control: pressure-based
        detection with a prompt alarm and selectable thresholds."""),
    doc("RISK-003", """
        RISK-003 Air embolism. Hazard: air delivered into the venous system. Cause: an empty container, a
        loose connection or outgassing of cold fluid introducing air into the set. Harm: venous air
        embolism, which is particularly critical in neonates and in patients with a patent foramen ovale.
        Severity: catastrophic. Control: ultrasonic air detection downstream of the mechanism with
        single-bubble and cumulative limits."""),
    doc("RISK-004", """
        RISK-004 Interruption of therapy by power loss. Hazard: therapy interruption. Cause: battery
        exhausted during patient transport or when mains is unavailable, or a battery aged beyond its
        service life. Harm: delayed or missed medication. Severity: serious. Controls: minimum run time on
        battery, early warning before depletion, and scheduled pack replacement during preventive
        maintenance."""),
    doc("RISK-005", """
        RISK-005 Tenfold programming error. Hazard: medication error. Cause: the user enters 100 instead
        of 10.0, chooses the wrong concentration or selects the wrong drug. Harm: overdose or underdose
        with severe consequences for high-alert medications. Severity: critical. Controls: drug library
        with soft and hard limits, confirmation screens showing drug and dose, and event logging of every
        override."""),
    doc("RISK-006", """
        RISK-006 Alarm not perceived. Hazard: delayed response to a hazardous situation. Cause: an
        auditory signal too quiet for a noisy intensive care unit, volume reduced by a user, or the pump
        placed behind other equipment. Harm: a prolonged occlusion, air or stop condition goes
        unnoticed. Severity: serious. Controls: minimum sound pressure level, limited volume adjustment,
        escalation and the nurse call output."""),
    doc("RISK-007", """
        RISK-007 Alarm fatigue. Hazard: users ignore or disable alarms. Cause: frequent nuisance alarms,
        such as false air detections or reminders without clinical relevance. Harm: genuine alarm
        conditions are missed. Severity: serious. Controls: adaptive air detection baseline, a clear
        priority scheme, fixed escalation of unacknowledged medium-priority conditions, and monitoring of
        false-alarm rates in post-market surveillance."""),
    doc("RISK-008", """
        RISK-008 Bolus after release of a blockage. Hazard: unintended bolus. Cause: pressure built up in
        the compliant tubing during a blockage is released into the patient when the clamp or kink is
        freed. Harm: overdose of potent drugs in small patients. Severity: serious. Controls: automatic
        back-off of the mechanism to relieve pressure, and lower thresholds available for neonatal care
        areas."""),
    doc("RISK-009", """
        RISK-009 Motor runaway from a software failure. Hazard: over-infusion at an uncontrolled rate.
        Cause: a hang of the main controller software, memory corruption, or an encoder failure leading
        to a motor speed above command. Harm: severe overdose. Severity: catastrophic. Controls: an
        independent safety processor with watchdog and speed supervision, and a software safety class C
        development process."""),
    doc("RISK-010", """
        RISK-010 Electric shock. Hazard: leakage current through the patient or the user. Cause:
        insulation breakdown in the power supply, or fluid ingress into the mains inlet. Harm: electric
        shock, including microshock via central venous lines. Severity: critical. Controls: class II power
        supply design, type CF applied part rating, and dielectric strength and leakage current tests in
        production."""),
    doc("RISK-011", """
        RISK-011 Cross-contamination between patients. Hazard: transfer of pathogens via device surfaces.
        Cause: inadequate cleaning between patients, surfaces that cannot be wiped effectively, or cracks
        that retain contaminated fluid. Harm: hospital-acquired infection. Severity: serious. Controls:
        smooth sealed housing, validated cleaning agents and method, and inspection for cracks before
        reuse."""),
    doc("RISK-012", """
        RISK-012 Fluid ingress. Hazard: loss of function or an electrical hazard. Cause: spilled infusion
        fluid, dripping bags mounted above the pump, or cleaning fluid running into openings. Harm:
        therapy interruption or electric shock. Severity: serious. Controls: IPX4 enclosure design, a
        drip shield above the door, and cleaning instructions that specify damp rather than wet
        wipes."""),
    doc("RISK-013", """
        RISK-013 Mechanical damage after a fall. Hazard: incorrect delivery by a damaged mechanism. Cause:
        the pump is knocked off a pole or dropped during transport. Harm: over- or under-infusion that is
        not obvious to the user. Severity: serious. Controls: robust housing and mechanism mounting, and a
        power-on self-test that checks the mechanism position sensors and blocks infusion if damage is
        detected."""),
    doc("RISK-014", """
        RISK-014 Unauthorised change of pump configuration over the network. Hazard: a manipulated drug
        library or settings. Cause: an attacker on the hospital network impersonating the library
        server. Harm: incorrect dose limits leading to medication errors. Severity: critical. Controls:
        signed drug libraries, mutual TLS authentication, no open listening ports, and certificate
        management."""),
    doc("RISK-015", """
        RISK-015 Electromagnetic interference. Hazard: a rate error or a false alarm. Cause: mobile phones,
        RFID readers or electrosurgery close to the pump. Harm: incorrect therapy or therapy interruption.
        Severity: serious. Controls: design for the IEC 60601-1-2 immunity levels, shielded motor and
        sensor harnesses, and supervision by the safety processor."""),
    doc("RISK-016", """
        RISK-016 Incorrect set loading. Hazard: uncontrolled flow or inaccurate delivery. Cause: the
        pumping segment is not fully seated in the channel, or the door is closed on the tubing. Harm:
        free flow or under-infusion. Severity: serious. Controls: a cassette geometry that fits only one
        way, door sensors that detect incomplete closure, and loading validated in summative usability
        testing."""),
    doc("RISK-017", """
        RISK-017 Siphoning. Hazard: over-infusion. Cause: a large height difference between pump and
        patient combined with a failed valve function in the mechanism. Harm: overdose. Severity:
        serious. Controls: the occluding fingers always close at least one segment in every motor
        position, and the instructions recommend mounting the pump at the level of the patient."""),
    doc("RISK-018", """
        RISK-018 Wrong line or wrong patient. Hazard: medication error. Cause: several pumps stacked on one
        pole with similar drugs, or a pump moved between patients without reprogramming. Harm: wrong drug
        into the wrong line. Severity: critical. Controls: drug name in large letters on the running
        screen, a new-patient prompt at power-on, and labelling of lines as information for safety."""),
    doc("RISK-019", """
        RISK-019 Loss of device history. Hazard: inability to investigate incidents. Cause: event memory
        lost on power removal, overwritten too early or corrupted. Harm: no direct harm, but corrective
        actions and reportability decisions after an incident are delayed. Severity: minor. Controls: a
        non-volatile event log with capacity and retention requirements, and service export."""),
    doc("RISK-020", """
        RISK-020 Battery thermal event. Hazard: fire or burns. Cause: an internal short circuit in a
        lithium-ion cell, charging outside the temperature limits, or mechanical damage to the pack.
        Harm: burns to patient or staff, smoke in the ward. Severity: critical. Controls: cells certified
        to IEC 62133-2, charge inhibit outside 0 to 45 °C, a pack protection circuit and a thermal
        fuse."""),
]

ACME_EDGES = """
# test protocol -> requirement it verifies
TP-030#0 VERIFIES REQ-010#0
TP-030#2 VERIFIES REQ-010#1
TP-031#2 VERIFIES REQ-012#0
TP-031#2 VERIFIES REQ-014#0
TP-032#2 VERIFIES REQ-013#0
TP-033#2 VERIFIES REQ-015#0
TP-034#0 VERIFIES REQ-016#0
TP-034#2 VERIFIES REQ-016#1
TP-035#1 VERIFIES REQ-002#1
TP-035#2 VERIFIES REQ-002#0
TP-036#2 VERIFIES REQ-020#0
TP-036#2 VERIFIES REQ-020#1
TP-037#2 VERIFIES REQ-021#0
TP-038#2 VERIFIES REQ-017#0
TP-039#2 VERIFIES REQ-024#0
TP-039#2 VERIFIES REQ-025#0
TP-040#2 VERIFIES REQ-005#0
TP-040#2 VERIFIES REQ-006#0
TP-041#2 VERIFIES REQ-004#0
TP-042#2 VERIFIES REQ-027#0
TP-043#2 VERIFIES REQ-029#0
TP-044#2 VERIFIES REQ-037#0
TP-045#2 VERIFIES REQ-031#0
TP-046#2 VERIFIES REQ-032#0
TP-047#2 VERIFIES REQ-026#0
TP-047#2 VERIFIES REQ-028#0

# requirement -> parent requirement or the SOP that specifies it
REQ-003#0 SPECIFIED_BY REQ-010#1
REQ-004#0 SPECIFIED_BY REQ-001#0
REQ-006#0 SPECIFIED_BY REQ-005#0
REQ-007#0 SPECIFIED_BY REQ-006#0
REQ-008#0 SPECIFIED_BY REQ-010#1
REQ-009#0 SPECIFIED_BY REQ-010#0
REQ-011#0 SPECIFIED_BY REQ-010#0
REQ-012#0 SPECIFIED_BY REQ-010#1
REQ-013#0 SPECIFIED_BY REQ-010#1
REQ-014#0 SPECIFIED_BY REQ-010#1
REQ-015#0 SPECIFIED_BY REQ-014#0
REQ-017#0 SPECIFIED_BY REQ-010#0
REQ-018#0 SPECIFIED_BY REQ-010#0
REQ-019#0 SPECIFIED_BY REQ-010#0
REQ-021#0 SPECIFIED_BY REQ-020#0
REQ-022#0 SPECIFIED_BY REQ-020#1
REQ-025#0 SPECIFIED_BY REQ-010#1
REQ-030#0 SPECIFIED_BY REQ-002#0
REQ-034#0 SPECIFIED_BY REQ-010#0
REQ-035#0 SPECIFIED_BY REQ-006#0
REQ-037#0 SPECIFIED_BY REQ-033#0
REQ-038#0 SPECIFIED_BY REQ-001#0
REQ-040#0 SPECIFIED_BY REQ-029#0
REQ-002#1 SPECIFIED_BY SOP-006#1
REQ-020#1 SPECIFIED_BY SOP-007#1
REQ-029#0 SPECIFIED_BY SOP-004#0
REQ-031#0 SPECIFIED_BY SOP-003#1
REQ-033#0 SPECIFIED_BY SOP-008#0
REQ-039#0 SPECIFIED_BY SOP-010#0

# requirement or test protocol -> deviation that affects it
REQ-002#0 IMPACTED_BY DEV-001#0
TP-035#2 IMPACTED_BY DEV-002#0
REQ-025#0 IMPACTED_BY DEV-003#0
TP-039#2 IMPACTED_BY DEV-003#1
REQ-016#0 IMPACTED_BY DEV-004#0
TP-034#2 IMPACTED_BY DEV-004#1
REQ-040#0 IMPACTED_BY DEV-005#0
REQ-005#0 IMPACTED_BY DEV-006#0
TP-040#2 IMPACTED_BY DEV-006#1
REQ-020#0 IMPACTED_BY DEV-007#0
TP-036#2 IMPACTED_BY DEV-007#0
REQ-017#0 IMPACTED_BY DEV-008#0
TP-038#2 IMPACTED_BY DEV-008#1
REQ-029#0 IMPACTED_BY DEV-009#0
TP-043#2 IMPACTED_BY DEV-009#1
REQ-012#0 IMPACTED_BY DEV-010#0
REQ-014#0 IMPACTED_BY DEV-010#1
REQ-037#0 IMPACTED_BY DEV-011#0
TP-044#2 IMPACTED_BY DEV-011#0
REQ-030#0 IMPACTED_BY DEV-011#1
REQ-024#0 IMPACTED_BY DEV-012#0
REQ-020#0 IMPACTED_BY DEV-013#0

# requirement -> risk item it mitigates
REQ-005#0 MITIGATES RISK-005#0
REQ-006#0 MITIGATES RISK-005#0
REQ-007#0 MITIGATES RISK-005#0
REQ-008#0 MITIGATES RISK-004#0
REQ-009#0 MITIGATES RISK-006#0
REQ-011#0 MITIGATES RISK-006#0
REQ-012#0 MITIGATES RISK-002#0
REQ-013#0 MITIGATES RISK-002#0
REQ-014#0 MITIGATES RISK-002#0
REQ-015#0 MITIGATES RISK-008#0
REQ-016#0 MITIGATES RISK-003#0
REQ-016#1 MITIGATES RISK-007#0
REQ-017#0 MITIGATES RISK-006#0
REQ-018#0 MITIGATES RISK-007#0
REQ-019#0 MITIGATES RISK-006#0
REQ-020#0 MITIGATES RISK-004#0
REQ-021#0 MITIGATES RISK-004#0
REQ-022#0 MITIGATES RISK-020#0
REQ-023#0 MITIGATES RISK-010#0
REQ-024#0 MITIGATES RISK-001#0
REQ-024#0 MITIGATES RISK-017#0
REQ-025#0 MITIGATES RISK-016#0
REQ-026#0 MITIGATES RISK-012#0
REQ-027#0 MITIGATES RISK-013#0
REQ-029#0 MITIGATES RISK-011#0
REQ-030#0 MITIGATES RISK-015#0
REQ-031#0 MITIGATES RISK-019#0
REQ-032#0 MITIGATES RISK-014#0
REQ-033#0 MITIGATES RISK-009#0
REQ-034#0 MITIGATES RISK-018#0
REQ-035#0 MITIGATES RISK-005#0
REQ-037#0 MITIGATES RISK-009#0
REQ-039#0 MITIGATES RISK-016#0

# SOP -> SOP it refers to
SOP-001#2 REFERENCES SOP-002#0
SOP-002#1 REFERENCES SOP-005#0
SOP-003#2 REFERENCES SOP-002#0
SOP-004#2 REFERENCES SOP-007#0
SOP-005#1 REFERENCES SOP-002#1
SOP-006#2 REFERENCES SOP-005#0
SOP-007#1 REFERENCES SOP-006#1
SOP-007#2 REFERENCES SOP-004#0
SOP-008#0 REFERENCES SOP-001#0
SOP-009#2 REFERENCES SOP-002#0
SOP-010#0 REFERENCES SOP-001#0
SOP-010#2 REFERENCES SOP-003#2
SOP-004-DE#0 REFERENCES SOP-004#0
SOP-004-DE#1 REFERENCES SOP-004#1
"""

# Components and tools mentioned across documents.  Order matters: a chunk gets
# MENTIONS edges to at most MAX_MENTIONS_PER_CHUNK entities, the first that match.
ACME_ENTITIES = {
    "downstream-pressure-sensor": r"downstream (occlusion|pressure)|strain gauge|occlusion (pressure )?threshold",
    "upstream-pressure-sensor": r"upstream (occlusion|pressure|roller|tubing)",
    "air-sensor": r"air[- ]in[- ]line|air sensor|air detection|bubble|Luftsensor",
    "safety-processor": r"safety processor|supervisor|watchdog",
    "battery-pack": r"battery|lithium|cell lot|cell supplier|\bpacks?\b|state of charge|Akku",
    "alarm-speaker": r"speaker|sound pressure|dB\(A\)|melod(y|ies)",
    "door-sensor": r"door (sensor|switch|interlock|position)|micro-switch|door open|opening the (pump )?door",
    "pumping-mechanism": r"pumping (mechanism|segment)|peristaltic|fingers|encoder|motor speed",
    "alarm-matrix": r"AM-300|alarm matrix",
    "wifi-module": r"Wi-Fi|TLS|wireless|RADIUS|certificate",
    "drug-library": r"drug library|library|soft limit|hard limit",
    "event-log": r"event log|history memory",
    "is-300-set": r"IS-300|administration set|flow-stop clip|silicone|Infusionsbesteck",
    "housing": r"housing|enclosure|screw boss|Gehäuse",
    "gravimetric-balance": r"\bbalances?\b|BAL-\d+",
    "test-pressure-transducer": r"\btransducer\b",
    "pole-clamp": r"pole clamp|pull tester",
    "udi-label": r"\blabels?\b|DataMatrix|\bUDI\b",
    "cleanroom": r"cleanroom|bioburden|sterilis",
    "build-server": r"build server|bill of materials",
    "document-control": r"EDMS|document owner|master list",
    "capa-board": r"\bCAPAs?\b",
    "complaint-database": r"complaint",
    "risk-management-file": r"risk management|severity",
    "supplier-quality": r"supplier|extruder",
    "qa-department": r"\bQA\b|quality (manager|department|assurance)",
}

ACME = Tenant("acme", "InfuSafe IP-300",
              ACME_REQUIREMENTS + ACME_TEST_PROTOCOLS + ACME_SOPS + ACME_DEVIATIONS + ACME_RISKS,
              ACME_EDGES, ACME_ENTITIES)


# ---------------------------------------------------------------------------
# Tenant "globex": StopSure EBC-7 electronic brake controller for light vans
# ---------------------------------------------------------------------------

GLOBEX_REQUIREMENTS = [
    doc("REQ-001", """
        REQ-001 Pressure build-up time. For an active braking request from the stability function, the
        EBC-7 shall build a wheel brake pressure of 100 bar at any single front wheel within 150 ms of
        receiving the request, starting from 0 bar with the brake pedal released, at a brake fluid
        temperature of 20 °C. The hydraulic modulator shall achieve this with the return pump as the only
        pressure source.""", """
        REQ-001 cold conditions and rationale. At a brake fluid temperature of -30 °C, where the viscosity
        of DOT 4 fluid rises steeply, the same 100 bar target shall be reached within 300 ms. The build-up
        time determines how quickly the stability function can correct an oversteer event; vehicle
        dynamics simulation showed that times above 200 ms at 20 °C reduce the stabilising yaw moment
        below the value assumed in the safety concept."""),
    doc("REQ-002", """
        REQ-002 ABS wheel slip control. During anti-lock braking the EBC-7 shall keep the longitudinal
        slip of each wheel between 5% and 25% on road surfaces with a friction coefficient from 0.1
        (polished ice) to 1.0 (dry asphalt), for vehicle speeds from 10 to 160 km/h. No wheel shall
        remain locked for more than 150 ms above 15 km/h."""),
    doc("REQ-003", """
        REQ-003 Braking performance with ABS. With ABS active, the laden test van shall reach a mean fully
        developed deceleration of at least 7.0 m/s² on dry asphalt from 100 km/h, and the adhesion
        utilisation on split and low-friction surfaces shall meet the requirements of UN Regulation
        No. 13, annex 13, for category 1 anti-lock systems."""),
    doc("REQ-004", """
        REQ-004 Yaw stability control. The ESC function shall intervene by braking individual wheels when
        the measured yaw rate deviates from the reference yaw rate by more than 4 °/s for longer than
        50 ms. In the sine-with-dwell manoeuvre the vehicle shall meet the lateral stability and
        responsiveness criteria of UN Regulation No. 140 in both steering directions."""),
    doc("REQ-005", """
        REQ-005 Wheel speed acquisition. The EBC-7 shall read four active wheel speed sensors with a
        resolution of 0.1 km/h and provide valid wheel speeds from 2 km/h to 300 km/h. Each wheel speed
        shall be published on the vehicle CAN bus every 10 ms together with an alive counter and a CRC,
        so that other control units can use the values for odometry and traction control."""),
    doc("REQ-006", """
        REQ-006 Wheel speed sensor monitoring. An open circuit, short circuit or implausible signal of any
        wheel speed sensor shall be detected within 300 ms while driving above 10 km/h. On detection the
        ABS and ESC functions shall be degraded according to the degradation matrix, a diagnostic trouble
        code shall be stored, and the driver shall be warned."""),
    doc("REQ-007", """
        REQ-007 Hill hold assist. When the driver releases the brake pedal on a gradient of up to 30%, the
        EBC-7 shall hold the vehicle stationary for 2 s or until sufficient drive torque is detected,
        whichever comes first. The hold pressure shall be released gradually over 300 ms to avoid a
        jerk, and the function shall work facing uphill in forward gear and facing downhill in
        reverse."""),
    doc("REQ-008", """
        REQ-008 Electronic brakeforce distribution. The EBC-7 shall limit the rear axle brake pressure so
        that the rear wheels do not lock before the front wheels at any deceleration up to 0.8 g and any
        load between kerb weight and gross vehicle weight. EBD shall remain available when ABS is switched
        off because of a single wheel speed sensor fault."""),
    doc("REQ-009", """
        REQ-009 Master cylinder pressure measurement. The integrated pressure sensor shall measure master
        cylinder pressure from 0 to 250 bar with an accuracy of ±2 bar up to 50 bar and ±4% of reading
        above 50 bar, over the full temperature range. Two independent measurement channels with opposite
        signal slopes shall be provided."""),
    doc("REQ-010", """
        REQ-010 Driver warning and alarm requirement. The EBC-7 shall request the driver warnings defined
        in the warning matrix WM-7 through the instrument cluster: the red brake warning telltale, the
        amber ABS telltale, the ESC telltale, and an acoustic alarm chime for conditions with reduced
        braking capability. Warnings shall be requested via CAN and, for the red telltale, additionally
        via a hard-wired output.""", """
        REQ-010 warning matrix WM-7. Red brake telltale plus acoustic alarm: hydraulic circuit failure,
        low brake fluid level, loss of EBD. Amber ABS telltale: ABS degraded or off. ESC telltale
        flashing: ESC intervention in progress; steady: ESC fault. All telltale requests shall be active
        within 100 ms of fault confirmation, and the cluster shall illuminate all telltales for a bulb
        check of 3 s at ignition on."""),
    doc("REQ-011", """
        REQ-011 Fault latching and diagnostic storage. Confirmed faults affecting braking functions shall
        keep the corresponding warning active for the remainder of the ignition cycle, even if the fault
        disappears. Each fault shall be stored as a diagnostic trouble code with a freeze frame
        containing vehicle speed, supply voltage, ECU temperature and odometer reading."""),
    doc("REQ-012", """
        REQ-012 Hydraulic circuit failure warning. The EBC-7 shall detect a failure of one of the two
        hydraulic brake circuits, indicated by a pressure difference between the circuits greater than
        20 bar during braking or by a stroke-pressure relationship outside the learned characteristic,
        and shall activate the red brake warning telltale and the acoustic alarm within 200 ms. The
        intact circuit shall continue to provide braking."""),
    doc("REQ-013", """
        REQ-013 Degraded operation after ECU fault. If the EBC-7 detects an internal fault that prevents
        safe valve control, it shall de-energise all solenoid valves so that the hydraulic unit returns to
        its unpowered state, in which the driver's pedal force acts directly on all four wheel brakes.
        Base braking performance in this state shall meet the service brake requirements without
        ABS."""),
    doc("REQ-014", """
        REQ-014 Supply voltage range. The EBC-7 shall provide full functionality for vehicle battery
        voltages between 9.0 V and 16.0 V measured at the ECU connector. Between 6.0 V and 9.0 V the ABS
        function shall remain available with reduced pump motor speed, and ESC may be disabled. The ECU
        shall survive a jump start at 24 V for 60 s without damage.""", """
        REQ-014 voltage transients and rationale. During engine cranking the supply can dip to 6 V for up
        to 40 ms according to the starting profile of ISO 16750-2; the ECU shall not reset during such a
        dip. The pump motor draws up to 40 A at start-up, which causes a local voltage drop across the
        supply harness; the voltage range therefore applies at the ECU connector and not at the battery
        terminals."""),
    doc("REQ-015", """
        REQ-015 Undervoltage behaviour. If the supply voltage stays below 9.0 V for more than 500 ms, the
        EBC-7 shall disable ESC and hill hold, set the ESC telltale and store a diagnostic trouble code.
        ABS shall remain active down to 7.5 V. When the voltage recovers above 9.5 V for 1 s, the
        functions shall be re-enabled without an ignition cycle."""),
    doc("REQ-016", """
        REQ-016 Quiescent current. With ignition off and the bus asleep, the EBC-7 shall draw no more than
        100 µA from the vehicle battery at 12.6 V and 25 °C, reached within 60 s of the last CAN message.
        This protects the vehicle battery during long parking periods of up to 4 weeks, together with the
        budgets of the other control units."""),
    doc("REQ-017", """
        REQ-017 Load dump. The EBC-7 shall withstand the suppressed load dump pulse of ISO 16750-2, test B,
        with a clamping voltage of 35 V, without damage and with functional status class C: normal
        operation may be interrupted during the pulse and shall resume automatically afterwards, without
        driver action or an ignition cycle."""),
    doc("REQ-018", """
        REQ-018 Reverse polarity. The ECU shall withstand a reverse polarity of -14 V applied for 60 s at
        25 °C without damage or blown internal fuses. No valve actuation or pump motor rotation shall
        occur during reverse polarity, and the unit shall be fully functional once the correct polarity
        is restored."""),
    doc("REQ-019", """
        REQ-019 Temperature range. The EBC-7 is mounted in the engine compartment and shall operate with
        full performance at ambient temperatures from -40 °C to +105 °C. Storage from -40 °C to +125 °C
        shall not cause degradation. Pump motor and coil temperatures shall be estimated in software to
        prevent thermal overload during long ESC interventions."""),
    doc("REQ-020", """
        REQ-020 Ingress protection. The assembled unit with mated connector shall meet IP6K9K according to
        ISO 20653, covering a dust-tight enclosure and high-pressure, high-temperature water jets from
        steam cleaning at 80 °C and 80 to 100 bar. The breather membrane shall prevent water ingress while
        equalising the internal pressure."""),
    doc("REQ-021", """
        REQ-021 Vibration resistance. The EBC-7 shall withstand random vibration according to ISO 16750-3
        for an engine compartment mounting on sprung masses, 8 h per axis, superimposed with temperature
        cycling from -40 °C to +105 °C, without loss of function and without loosening of the valve block
        fasteners."""),
    doc("REQ-022", """
        REQ-022 Thermal shock. The unit shall withstand 300 air-to-air thermal shock cycles between -40 °C
        and +105 °C with a dwell of 30 minutes and a transfer time below 30 s, followed by a functional
        test, a leak test and a cross-section analysis showing no PCB solder joint cracks longer than 50%
        of the joint."""),
    doc("REQ-023", """
        REQ-023 Corrosion resistance. The aluminium valve block and the steel brake pipe ports shall show
        no red rust and no loss of function after 720 h of neutral salt spray according to ISO 9227. White
        corrosion on the aluminium is acceptable if it does not affect sealing surfaces or the thread
        engagement of the pipe nuts."""),
    doc("REQ-024", """
        REQ-024 CAN communication and timeout. The EBC-7 shall communicate on the chassis CAN FD bus at
        500 kbit/s arbitration and 2 Mbit/s data rate. If a required input message, such as steering angle
        or engine torque, is missing for more than 50 ms, the EBC-7 shall use substitute values, degrade
        the dependent functions and store a timeout trouble code."""),
    doc("REQ-025", """
        REQ-025 Diagnostic services. The EBC-7 shall support UDS diagnostic services according to
        ISO 14229 over CAN, including reading and clearing DTCs, reading data identifiers for all sensor
        values, routine control for valve and pump actuation in the workshop, and the brake bleeding
        routines used in service after hydraulic repairs."""),
    doc("REQ-026", """
        REQ-026 Functional safety integrity. The EBC-7 shall be developed according to ISO 26262 with
        ASIL D for the safety goals SG-01 (avoid unintended braking) and SG-02 (avoid loss of braking
        capability beyond the base brake), and ASIL C for SG-03 (avoid unintended loss of ESC
        intervention). The safety case shall be assessed by an independent functional safety
        assessor."""),
    doc("REQ-027", """
        REQ-027 Prevention of unintended braking. The EBC-7 shall not build a wheel brake pressure above
        5 bar at any wheel for longer than 100 ms without a valid braking request from the driver or from
        an authorised vehicle function. This requirement implements safety goal SG-01 and applies at all
        vehicle speeds, including during reprogramming and diagnostic sessions.""", """
        REQ-027 safety mechanisms. Unintended pressure shall be prevented by two independent paths: the
        main core of the lockstep microcontroller validates every pump and valve command against the
        request, and an independent monitoring circuit shuts off the pump motor and the valve supply
        through a separate high-side switch when the measured pressure rises without a request. The fault
        tolerant time interval is 150 ms."""),
    doc("REQ-028", """
        REQ-028 Return pump motor durability. The pump motor shall withstand 1 000 000 actuation cycles of
        the ABS control profile and 500 h of cumulative run time without exceeding a current draw of 40 A
        at start-up and 25 A in steady operation at 13.5 V. Brush wear shall remain within the limits of
        the motor specification."""),
    doc("REQ-029", """
        REQ-029 Solenoid valve response. The inlet valves shall close within 8 ms and the outlet valves
        shall open within 6 ms of the control signal, over the full supply voltage and temperature range.
        The valve coil driver shall use pulse width modulation at 4 kHz with current control to achieve
        proportional operation of the inlet valves."""),
    doc("REQ-030", """
        REQ-030 Electromagnetic compatibility. The EBC-7 shall meet CISPR 25 class 3 for conducted and
        radiated emissions, and withstand radiated immunity of 100 V/m from 200 MHz to 3 GHz per
        ISO 11452-2 and bulk current injection of 100 mA per ISO 11452-4, without loss of function or
        false warnings."""),
    doc("REQ-031", """
        REQ-031 Software development. The EBC-7 software shall be developed to ISO 26262 part 6 for ASIL D
        components, based on the AUTOSAR classic platform release 4.4, and shall comply with MISRA C:2012,
        with deviations documented and approved. Safety-related code shall achieve 100% MC/DC coverage in
        unit testing."""),
    doc("REQ-032", """
        REQ-032 Cybersecurity. The EBC-7 shall implement secure boot with a hardware trust anchor, protect
        brake request messages with AUTOSAR SecOC using a 128-bit CMAC and freshness values, and restrict
        UDS security access to authenticated diagnostic testers. The cybersecurity engineering process
        shall follow ISO/SAE 21434."""),
    doc("REQ-033", """
        REQ-033 Reprogramming conditions. Software reprogramming of the EBC-7 by workshop tester or over
        the air shall only start when the vehicle is at standstill with the parking brake applied, the
        ignition on and the supply voltage above 11.5 V. An interrupted reprogramming shall leave the ECU
        in the bootloader with a valid fallback image, so that programming can be repeated."""),
    doc("REQ-034", """
        REQ-034 Brake fluid compatibility. All wetted parts of the hydraulic modulator, including seals,
        valve seats and pump pistons, shall be compatible with DOT 4, DOT 4 LV and DOT 5.1 brake fluids
        according to ISO 4925, for a service life of 15 years and with brake fluid containing up to 3.5%
        water."""),
    doc("REQ-035", """
        REQ-035 Internal leakage. Internal leakage of the hydraulic modulator across closed inlet valves
        shall not exceed 0.5 cm³/min at 200 bar and 20 °C. External leakage at any port or plug shall be
        zero, verified by a helium leak test at end of line with a rejection limit of 1×10⁻⁴ mbar·l/s on
        every unit."""),
    doc("REQ-036", """
        REQ-036 Acoustic noise. During an ABS stop on dry asphalt, the noise from the hydraulic unit
        measured at the driver's head position shall not exceed 65 dB(A) in the reference van, and pump
        motor operation during hill hold or pre-fill shall not exceed 45 dB(A) at idle, so that customers
        do not perceive it as a fault."""),
    doc("REQ-037", """
        REQ-037 Microcontroller monitoring. The main microcontroller shall run in dual-core lockstep, and
        an external watchdog with a question-and-answer protocol shall supervise program flow. A detected
        core mismatch or a wrong watchdog answer shall switch off the valve and pump supply within 20 ms
        and set the ECU to the safe state defined in REQ-013."""),
    doc("REQ-038", """
        REQ-038 Mass and envelope. The complete hydraulic electronic control unit, including ECU, valve
        block and pump motor, shall weigh no more than 2.4 kg and fit within 150 × 120 × 140 mm, with brake
        pipe ports M10×1 and M12×1 positioned as shown in installation drawing ID-7-004."""),
    doc("REQ-039", """
        REQ-039 Connector and harness interface. The ECU shall use a 46-pin sealed connector with a
        secondary locking device, rated for 10 mating cycles. The pump motor supply and ground shall use
        dedicated 2.8 mm terminals rated for 40 A, separate from the logic supply, to limit voltage drops
        during pump start."""),
    doc("REQ-040", """
        REQ-040 Marking and traceability. Each unit shall carry a laser-marked DataMatrix code with part
        number, serial number, production date and line. Component lots, including valve coils, the PCB
        panel and the pump motor, shall be traceable from the serial number for 15 years after the end of
        production."""),
]

GLOBEX_TEST_PROTOCOLS = [
    doc("TP-030", """
        TP-030 Warning and alarm verification. Objective: this protocol verifies the alarm requirement
        REQ-010 and the warning matrix WM-7 on a hardware-in-the-loop (HIL) bench with a production
        instrument cluster. Each entry of the matrix is provoked by fault injection and the telltale and
        chime response is recorded. Equipment: HIL simulator with brake hydraulics model, CAN logger,
        photodiodes taped over each telltale, and a microphone next to the cluster.""", """
        TP-030 procedure. Power up the bench and record the 3 s bulb check. For each WM-7 entry, inject the
        fault through the HIL fault insertion unit, for example by opening the brake fluid level switch
        circuit or disconnecting the right rear wheel speed sensor at 50 km/h. Record the CAN warning
        request, the photodiode signal and the microphone signal on a common time base. Clear the fault,
        cycle the ignition and check that latched warnings return.""", """
        TP-030 acceptance criteria. Every telltale request appears on CAN within 100 ms of fault
        confirmation, the correct telltale illuminates, and the chime sounds for all red-telltale
        conditions. Latched warnings persist until the next ignition cycle. Results for software release
        4.1.0: all 14 matrix entries passed; the hard-wired red telltale output was measured at 38 ms
        worst case."""),
    # TP-031 verifies REQ-012 but deliberately shares almost no words with it (graph demo).
    doc("TP-031", """
        TP-031 Split-system pressure loss test on the vehicle. Objective: confirm that the driver is
        informed promptly when one of the two brake lines loses fluid, and that the remaining line pair
        still decelerates the van. Setup: test van on a closed track, a bleed screw adapter with a
        quick-opening valve on the left front caliper, a collection bottle, pressure transducers on both
        master cylinder outlets, and a photodiode on the red lamp in the cluster.""", """
        TP-031 procedure. Drive at 50 km/h and apply moderate pedal force to reach about 0.3 g. Open the
        quick-opening valve at the left front caliper so that the primary line empties into the bottle.
        Record the two outlet pressures, the photodiode signal and the in-cabin microphone on the data
        logger. Repeat five times, then five times with the valve on the right rear caliper, which
        belongs to the secondary line in the diagonal split layout.""", """
        TP-031 acceptance criteria. Lamp on and chime audible within 200 ms of the moment the outlet
        pressure difference exceeds 20 bar. Deceleration achieved with the remaining line at least
        2.9 m/s² within the pedal force limit of 500 N. Results on the C-sample prototype: lamp latency
        96 to 141 ms, residual deceleration 3.4 m/s², and no false activation during 200 normal
        stops."""),
    doc("TP-032", """
        TP-032 Active pressure build-up test. Objective: verifies REQ-001 by measuring the time to reach
        100 bar at a front wheel during a stability intervention request. Setup: hydraulic test bench with
        original calipers and 1 m of brake pipe per wheel, pressure transducers at the calipers sampled at
        10 kHz, a climatic chamber for the hydraulic unit, DOT 4 fluid conditioned to 20 °C and -30 °C,
        and a CAN tool to send the intervention request.""", """
        TP-032 procedure. With the pedal released, send an active braking request for the front left wheel
        with a target of 120 bar and start the recording at the CAN message time stamp. Measure the time
        until the caliper pressure reaches 100 bar. Repeat ten times per wheel with 30 s cooling
        intervals, then condition unit and fluid at -30 °C for 4 h and repeat. Record pump motor current
        and supply voltage throughout.""", """
        TP-032 acceptance criteria. Time to 100 bar at most 150 ms at 20 °C and at most 300 ms at -30 °C
        for every repetition. Results for B-sample units: 118 to 134 ms at 20 °C and 262 to 291 ms at
        -30 °C. The cold margin is small; the report recommends repeating the cold test with the series
        pump motor before production release."""),
    doc("TP-033", """
        TP-033 Anti-lock braking on low-friction and split surfaces. Objective: evaluate slip control and
        stopping performance on winter test surfaces. Setup: winter test facility with polished ice,
        packed snow and a split surface of ice and basalt tiles, a laden and an unladen test van, wheel
        speed and GPS reference speed measurement, and a brake robot for repeatable pedal
        application.""", """
        TP-033 procedure. Perform full brake applications from 50, 80 and 100 km/h on each surface, five
        runs each, laden and unladen. On the split surface keep the steering wheel fixed for the first
        2 s and record the steering correction needed afterwards. Evaluate the slip of each wheel from
        wheel speed and reference speed, the lock durations, and the mean fully developed
        deceleration.""", """
        TP-033 acceptance criteria. Slip of every wheel within 5 to 25% during control, no wheel lock
        longer than 150 ms above 15 km/h, adhesion utilisation of at least 0.75 on all surfaces, and
        steering correction on the split surface within the regulation limits. Results: all criteria met;
        ice runs showed occasional locks of 120 ms on the rear axle at 12 km/h, below the speed
        threshold."""),
    doc("TP-034", """
        TP-034 Sine-with-dwell stability test. Objective: demonstrate yaw stability and responsiveness of
        the ESC function with the standard steering robot manoeuvre. Setup: high-friction dry test pad,
        steering robot, inertial measurement unit at the vehicle centre of gravity, outriggers fitted to
        the laden van, and a slowly increasing steer test to determine the steering amplitude.""", """
        TP-034 procedure. Determine the steering wheel angle that produces 0.3 g lateral acceleration at
        80 km/h. Perform sine-with-dwell runs at 0.7 Hz with a 500 ms dwell, starting at 1.5 times this
        angle and increasing in steps up to 6.5 times or 270°, in both steering directions. Record yaw
        rate, lateral displacement and the individual wheel pressures.""", """
        TP-034 acceptance criteria. Yaw rate 1.0 s after completion of steer at most 35% of the first
        peak, and 1.75 s after at most 20%; lateral displacement at least 1.83 m at 1.07 s after steering
        onset. All runs passed. The data also show interventions beginning when the yaw error exceeded
        4 °/s, consistent with the intervention threshold in the specification."""),
    doc("TP-035", """
        TP-035 Wheel speed sensor fault injection. Objective: verify the detection of sensor faults and
        the degraded behaviour of the brake functions. Setup: test van with a fault injection box inserted
        in each wheel speed sensor line, allowing open circuit, short to ground, short to battery and
        intermittent signal; a CAN logger; and a diagnostic tester.""", """
        TP-035 procedure. At 30, 60 and 100 km/h, insert each fault type on each sensor in turn. Record the
        time from insertion to the stored trouble code and to the warning request. After each fault,
        perform a brake application at 0.6 g and check for rear wheel lock. Reset the faults with the
        tester between runs and note any fault that does not clear.""", """
        TP-035 acceptance criteria. All faults detected within 300 ms, with the warning requested and the
        DTC stored with its freeze frame. With one sensor failed, brakeforce distribution keeps the rear
        wheels from locking before the front wheels. Results: intermittent faults at 30 km/h took up to
        280 ms to confirm, all other faults less than 120 ms; passed."""),
    doc("TP-036", """
        TP-036 Supply voltage range and undervoltage behaviour. Objective: verifies REQ-014 and REQ-015 on
        the HIL bench, with a programmable power supply replacing the vehicle battery. Setup: bench with
        the EBC-7 connected to a 60 A programmable supply, a current probe on the motor supply, an
        ISO 16750-2 starting profile generator, and a CAN logger.""", """
        TP-036 procedure. Sweep the supply from 16 V down to 5 V in 0.5 V steps, holding each step for
        10 s while the HIL requests ABS cycling and an ESC intervention. Note the voltages at which ESC is
        disabled and at which ABS stops. Apply the cranking profile with a 6 V dip of 40 ms, then 24 V for
        60 s. Raise the voltage back to 9.5 V and check function recovery after 1 s.""", """
        TP-036 acceptance criteria. Full function between 9.0 and 16.0 V; ESC disabled and its telltale set
        after 500 ms below 9.0 V; ABS maintained down to 7.5 V; no reset during the cranking dip; no
        damage after 24 V; recovery without an ignition cycle. Passed with software 4.0.2; the earlier
        release 3.9.0 reset during the dip and was corrected."""),
    doc("TP-037", """
        TP-037 Sleep current measurement. Objective: measure the current drawn by the brake controller
        after the vehicle is switched off, to protect the starter battery during parking. Setup: EBC-7 on
        a bench harness, a precision ammeter with 10 nA resolution in series with the supply at 12.6 V, a
        CAN network simulation that stops all traffic on command, and a temperature chamber at 25 °C and
        85 °C.""", """
        TP-037 procedure. Switch the ignition off in the network simulation and stop bus traffic. Record
        the current every 100 ms for 5 minutes, then every 10 s for 1 h. Wake the ECU with a CAN frame and
        repeat the shutdown ten times. Repeat the sequence at 85 °C. Check that no wake-up occurs
        spontaneously over 12 h of observation.""", """
        TP-037 acceptance criteria. Current below 100 µA within 60 s after the last bus message at 25 °C,
        and below 150 µA at 85 °C for information. No spontaneous wake-up. Initial results with software
        3.2.0 showed 180 µA because the transceiver stayed in standby; see DEV-007. Passed with software
        3.2.1 at 62 µA."""),
    doc("TP-038", """
        TP-038 Electrical transient robustness. Objective: confirm that the ECU survives supply transients
        and incorrect connection in the workshop. Setup: ISO 16750-2 pulse generator for test B with 35 V
        clamping, a reverse polarity supply, a thermal camera, and a functional test harness for before
        and after comparison.""", """
        TP-038 procedure. Apply ten load dump pulses at 1-minute intervals while the ECU runs ABS cycling
        on the HIL bench. Monitor the CAN messages for interruptions and record the automatic recovery.
        Then apply -14 V for 60 s with the ECU off, observing the valve and motor outputs with current
        probes. Run the full functional test afterwards.""", """
        TP-038 acceptance criteria. Functional status class C for load dump: operation may stop during a
        pulse and resumes without intervention. No valve or motor current during reverse polarity. No
        damage, and all functional tests passed afterwards. Thermal images show the reverse polarity
        MOSFET at 61 °C maximum."""),
    doc("TP-039", """
        TP-039 Temperature and thermal shock qualification. Objective: demonstrate operation at the
        temperature extremes and robustness against rapid temperature change. Setup: two-chamber thermal
        shock system, a climatic chamber with hydraulic feedthroughs, six production-intent units, the
        cross-section laboratory, and the end-of-line functional tester.""", """
        TP-039 procedure. Operate three units at -40 °C and +105 °C for 4 h each with continuous ABS
        cycling and functional checks every 30 minutes. Submit six units to 300 shock cycles from -40 °C
        to +105 °C with 30 minutes dwell and a transfer under 30 s. After cycling, run the functional and
        helium leak tests, then cross-section two units at the BGA and power MOSFET solder joints.""", """
        TP-039 acceptance criteria. No functional deviation at the temperature extremes; after shock, all
        units pass function and leak tests and no solder joint crack exceeds 50% of the joint length.
        Results: operating tests passed, but the pressure sensor offset at 105 °C exceeded the ±2 bar
        limit on one unit, see DEV-002; cracks in the potting compound were recorded under DEV-009."""),
    doc("TP-040", """
        TP-040 Water, dust and salt spray exposure. Objective: demonstrate the sealing of the housing and
        the corrosion resistance of the valve block. Setup: dust chamber with talcum powder, high-pressure
        water jet rig at 80 °C with nozzle positions at 0°, 30°, 60° and 90°, a salt spray chamber per
        ISO 9227, and a helium leak tester.""", """
        TP-040 procedure. Expose three units with mated connectors to dust for 8 h under vacuum, then to
        the high-pressure jet at 80 to 100 bar for 30 s per position. Open the housings and inspect for
        water. Expose three other units to neutral salt spray for 720 h and perform functional and leak
        tests every 240 h. Photograph the ports and sealing surfaces at each interval.""", """
        TP-040 acceptance criteria. No dust deposits or water inside the housing, no red rust, and function
        and leak tests passed. Results: dust and water exposure passed. Salt spray: two units showed red
        rust spots at the M12 port threads after 480 h; see DEV-012. A re-test is pending with new
        zinc-nickel plated samples."""),
    doc("TP-041", """
        TP-041 Vibration test with temperature superposition. Objective: confirm the mechanical integrity
        of the hydraulic unit under engine compartment vibration. Setup: electrodynamic shaker with
        climatic hood, a mounting bracket identical to the vehicle part, accelerometers on the valve block
        and the PCB, and a torque wrench to check the fasteners afterwards.""", """
        TP-041 procedure. Run the random vibration profile for sprung masses for 8 h per axis with the
        temperature cycling between -40 °C and +105 °C. Keep the unit powered and monitor valve and sensor
        diagnostics throughout. After each axis, measure the breakaway torque of the four valve block
        screws and of the bracket bolts.""", """
        TP-041 acceptance criteria. No diagnostic events during vibration, no cracks, and fastener
        breakaway torque at least 80% of the installation torque. Results: passed on all three axes. A
        resonance of the PCB at 1.1 kHz was noted and judged acceptable by the simulation team after
        comparison with the fatigue model."""),
    doc("TP-042", """
        TP-042 CAN message timeout handling. Objective: verify the reaction of the brake controller to
        missing input messages from other ECUs. Setup: HIL bench with a restbus simulation of the chassis
        CAN FD network, message suppression per message ID, and a bus load generator for up to 70% load.
        The simulated vehicle runs the standard lane change scenario.""", """
        TP-042 procedure. While driving a simulated lane change at 80 km/h, suppress in turn the steering
        angle, engine torque and gear position messages for 20, 45, 55 and 200 ms. Record the function
        degradation, the substitute values and the trouble code storage. Repeat the whole sequence with
        70% bus load.""", """
        TP-042 acceptance criteria. No reaction to gaps of 45 ms or less; substitute values, degradation
        and a trouble code for gaps above 50 ms. At 70% bus load no false timeout. Results: false timeouts
        at 70% load with software 4.0.0, see DEV-004; passed with software 4.0.2."""),
    doc("TP-043", """
        TP-043 Fault injection for unintended pressure build-up. Objective: confirm the effectiveness of
        both shut-off paths for unrequested wheel pressure. Setup: HIL bench with the real hydraulic unit,
        a software fault injection build able to command pump and valves directly, a relay to disable the
        main path, and 10 kHz pressure recording at all four calipers.""", """
        TP-043 procedure. Inject a stuck-on pump motor command, an inlet valve commanded closed with the
        outlet closed during pump run, a corrupted intervention request with valid CRC but wrong target
        wheel, and a failure of the main path combined with pump run. Run each case at standstill, 30 km/h
        and 130 km/h in the simulation. Measure the peak pressure and the duration above 5 bar.""", """
        TP-043 acceptance criteria. Caliper pressure not above 5 bar for longer than 100 ms in any injected
        case, and the safe state reached within the fault tolerant time interval of 150 ms. Results: passed
        for 11 of 12 cases; one case at 130 km/h reached 7 bar for 118 ms and is under investigation as
        DEV-010."""),
    doc("TP-044", """
        TP-044 Solenoid valve switching time. Objective: measure the switching times of inlet and outlet
        valves across voltage and temperature. Setup: valve block on a hydraulic bench with a 160 bar
        supply, a valve needle displacement sensor, coil current probes, and a programmable supply for 9,
        13.5 and 16 V.""", """
        TP-044 procedure. At -40, 20 and 105 °C and at each voltage, command each valve 100 times and record
        the delay between the control edge and the end of needle travel. Run the proportional mode of the
        inlet valves with PWM duty cycles from 20% to 80% and record the resulting pressure gradient at
        the caliper.""", """
        TP-044 acceptance criteria. Inlet valves closed within 8 ms and outlet valves open within 6 ms in
        all conditions; monotonic relation between duty cycle and pressure gradient. Results: worst-case
        inlet closing at -40 °C and 9 V was 7.2 ms; passed. Coils from supplier lot 23-118 showed longer
        times and were handled in DEV-001."""),
    doc("TP-045", """
        TP-045 EMC emissions and immunity. Objective: verify compliance of the brake controller with the
        vehicle manufacturer's EMC specification. Setup: absorber-lined shielded room, artificial network,
        a load simulator with the real pump motor and valve block, an antenna set from 150 kHz to 6 GHz,
        and a bulk current injection probe.""", """
        TP-045 procedure. Measure conducted emissions on the supply lines and radiated emissions with the
        ECU in ABS cycling mode. For immunity, expose the unit to 100 V/m from 200 MHz to 3 GHz with AM and
        pulse modulation while monitoring wheel speed signals, valve outputs and warning requests. Inject
        100 mA of bulk current into the harness from 1 to 400 MHz.""", """
        TP-045 acceptance criteria. Emissions below the class 3 limits; no loss of function, false valve
        actuation, false warning or DTC during immunity exposure. Results: emissions passed with a 4 dB
        margin after a ferrite was added to the motor leads; immunity passed at all frequencies and
        modulations."""),
    doc("TP-046", """
        TP-046 Hill hold on test slopes. Objective: check the holding function on steep gradients for a
        van with manual gearbox. Setup: test slopes of 10%, 20% and 30%, a laden and an unladen van, wheel
        speed logging, and an accelerometer for jerk evaluation. Two drivers alternate to avoid learning
        effects in the release timing.""", """
        TP-046 procedure. Stop on the slope facing uphill, release the brake pedal and move the foot to the
        accelerator without pressing it. Record the roll-back distance and the hold duration. Repeat with
        a normal hill start and measure the release jerk. Repeat facing downhill in reverse gear, laden
        and unladen.""", """
        TP-046 acceptance criteria. No roll-back for 2 s on all slopes up to 30%, release when drive torque
        is sufficient, and jerk during release below 10 m/s³. Results: passed laden and unladen; a
        roll-back of 3 cm was measured at release on the 30% slope unladen and judged acceptable by the
        vehicle team."""),
    doc("TP-047", """
        TP-047 Reprogramming robustness. Objective: verify that flashing can only start in safe vehicle
        conditions and that interrupted flashing can be recovered. Setup: vehicle network simulation,
        workshop tester, an over-the-air master ECU simulation, a programmable supply, and a relay box to
        interrupt supply and CAN during flashing.""", """
        TP-047 procedure. Attempt to start programming at 5 km/h, with the parking brake released, and at
        11.0 V; each attempt must be refused. Start a valid session and interrupt it by supply loss and by
        bus-off at 10%, 50% and 95% progress. Restart the session after each interruption and complete it,
        then read back the software version.""", """
        TP-047 acceptance criteria. Programming is refused under all unsafe conditions; after every
        interruption the ECU remains in the bootloader and can be reprogrammed successfully; no brake
        pressure is built at any time. Passed for both the workshop tester and the over-the-air path with
        bootloader version 2.1."""),
]

GLOBEX_SOPS = [
    doc("SOP-001", """
        SOP-001 Document and record control. Purpose: defines the control of documents in the Globex
        brake systems quality management system according to IATF 16949. It covers product
        specifications, test protocols, work instructions, control plans and customer-specific
        requirements. Customer engineering standards are reviewed within 10 working days of
        receipt.""", """
        SOP-001 procedure. Documents are authored in the PLM system, reviewed by the responsible engineer
        and approved by the department head; safety-relevant documents also require the functional safety
        manager. Changes that affect the product or the process at a customer require a change request and
        customer approval before release, according to the PPAP requirements.""", """
        SOP-001 records retention. Records of safety-relevant parts, including test reports, production
        records and traceability data, are retained for the product life in service plus one calendar
        year, and for at least 15 years. Obsolete documents are archived with read-only access and marked
        as superseded."""),
    doc("SOP-002", """
        SOP-002 8D problem solving. Purpose: structured problem solving for customer complaints, internal
        quality problems and supplier issues at Globex, using the eight disciplines method. Applies to all
        plants producing the StopSure EBC-7 and its variants, and to the development centre for problems
        found in validation.""", """
        SOP-002 procedure. D1 form the team; D2 describe the problem with an is/is-not analysis; D3
        implement containment within 24 h; D4 identify root causes for occurrence and non-detection; D5
        choose corrective actions; D6 implement and validate them; D7 prevent recurrence by updating the
        FMEA, the control plan and lessons learned; D8 recognise the team. Customer 8D reports are due at
        D3 within 24 h and at D5 within 10 working days.""", """
        SOP-002 verification and closure. Effectiveness is verified with data, typically no recurrence in
        3 months of production or a Cpk above 1.67 for the affected characteristic. The 8D is closed by the
        quality manager; lessons learned are entered in the knowledge database and reviewed in the next
        FMEA update."""),
    doc("SOP-003", """
        SOP-003 Field return and warranty analysis. Purpose: defines the handling of EBC-7 units returned
        from vehicle manufacturers, dealers and fleet customers under warranty or as part of a field
        complaint. Covers receipt, analysis, no-trouble-found handling and reporting to the customer
        through the supplier portal.""", """
        SOP-003 procedure. Returned units are registered with their serial number and the vehicle
        manufacturer's claim number. The DTC memory and freeze frames are read out before any other
        action. Analysis follows the standard sequence: visual inspection, end-of-line test, hydraulic leak
        test, X-ray and, if needed, opening of the housing. No-trouble-found units undergo an extended test
        at the temperature extremes.""", """
        SOP-003 reporting. Results are reported within 10 working days in the customer portal. Confirmed
        defects trigger an 8D according to SOP-002. Return rates per failure mode are reported monthly; a
        rate above the 0.2 ppm target for a safety-relevant failure mode triggers an escalation to the
        plant manager."""),
    doc("SOP-004", """
        SOP-004 Technical cleanliness and brake fluid handling. Purpose: keep particles and moisture out of
        the hydraulic modulator during machining, assembly and filling. Scope: valve block washing, the
        assembly line, end-of-line filling with brake fluid, and storage of DOT 4 fluid. Cleanliness
        limits follow VDA 19, with a maximum particle size of 400 µm for metallic and 600 µm for
        non-metallic particles.""", """
        SOP-004 procedure. Valve blocks are washed in the multi-stage washer and dried at 80 °C; one block
        per shift is extracted and analysed according to VDA 19. Brake fluid drums are opened only in the
        filling room, purged with dry nitrogen and used within 30 days. The water content is checked weekly
        by Karl Fischer titration with a limit of 0.2%.""", """
        SOP-004 deviations and records. Any particle finding above the limit stops shipment of the affected
        shift until the cause is understood, and a nonconformance is opened. Results are recorded in the
        cleanliness database together with the washer parameters. Open brake fluid is never returned to
        the drum."""),
    doc("SOP-005", """
        SOP-005 Nonconforming product and deviation permits. Purpose: defines how nonconforming parts and
        process deviations are identified, segregated and dispositioned, and how temporary deviation
        permits are requested from the customer. Every event receives a DEV number in the quality
        system, and its status is visible to production, logistics and the customer team.""", """
        SOP-005 procedure. Suspect parts are tagged red and moved to the locked quarantine area within the
        shift. The quality engineer defines the scope using traceability data, assesses the risk, and
        decides on rework, scrap, sorting or use as is. Use as is for safety-relevant characteristics
        requires a written deviation permit from the vehicle manufacturer.""", """
        SOP-005 escalation. Nonconformities on special characteristics marked as safety-relevant in the
        control plan are escalated to the plant manager within 4 h and open an 8D per SOP-002. Deviation
        permits are limited in time and quantity and are tracked in the quality system until they
        expire."""),
    doc("SOP-006", """
        SOP-006 Calibration of hydraulic test equipment. Purpose: assure the measurement capability of the
        pressure transducers, flow meters, helium leak detectors and current probes used in validation
        and end-of-line testing. All equipment is listed in the gauge management system with its
        calibration interval and responsible owner.""", """
        SOP-006 procedure. Pressure transducers are calibrated every 12 months against a dead-weight tester
        traceable to national standards, at 10 points from 0 to 250 bar. The leak detector is checked
        every shift with a calibrated test leak. Measurement system analysis (gauge R&R) is repeated
        annually for end-of-line characteristics, and %GRR must be below 10%.""", """
        SOP-006 out-of-tolerance handling. If a gauge is found out of tolerance, all parts tested since the
        last successful calibration are identified through traceability, a nonconformance is opened under
        SOP-005, and a risk assessment decides on recall from stock or customer notification."""),
    doc("SOP-007", """
        SOP-007 End-of-line test of the EBC-7. Purpose: defines the 100% final test performed on every
        hydraulic electronic control unit before packing. Scope: evacuation and filling, helium leak test,
        electrical test, valve and pump function test, pressure sensor calibration, and flashing of the
        software for the customer variant.""", """
        SOP-007 procedure. The unit is evacuated to below 1 mbar, filled with DOT 4 fluid and leak tested
        with helium at 30 bar. The electrical test checks insulation, coil resistances and sensor offsets.
        The pump runs for 5 s and the valves are cycled while the pressure response is compared with the
        reference envelope. Pressure sensor offsets are trimmed and stored in the ECU.""", """
        SOP-007 results. Failed units are routed automatically to the repair station, and a unit may be
        re-tested at most twice. Test results are stored with the serial number. First-pass yield is
        reviewed daily; a drop below 97% triggers a line stop review with production and quality
        engineering."""),
    doc("SOP-008", """
        SOP-008 Software release and change management. Purpose: governs the release of EBC-7 application
        software, calibration data sets and the bootloader according to Automotive SPICE level 3 and
        ISO 26262 part 8. Every release carries a version, a build identifier and the list of calibration
        data set variants it supports.""", """
        SOP-008 procedure. A release candidate passes unit tests, static analysis, HIL regression and the
        vehicle tests defined in the release test plan. The functional safety manager confirms that the
        safety analyses are updated and that no open safety anomaly remains. The release is signed with
        the production key and submitted to the vehicle manufacturer for integration.""", """
        SOP-008 records. The software bill of materials, tool versions and test reports are archived with
        each release. Field software updates are documented per vehicle identification number by the
        vehicle manufacturer; Globex keeps the release history for 15 years and can rebuild any released
        software from the archive."""),
    doc("SOP-009", """
        SOP-009 Supplier process audit programme (confidential). Purpose: describes the VDA 6.3 process
        audits of Globex suppliers of solenoid valve coils, pressure sensors, pump motors and PCB assembly.
        Contains supplier ratings and findings; access is limited to the quality department and
        purchasing management.""", """
        SOP-009 audit procedure. New suppliers are audited before nomination, series suppliers every
        3 years or after an escalation. A VDA 6.3 score below 80% rates the supplier B, below 70% C; C-rated
        suppliers are blocked for new business. The 2024 audit of the coil winding supplier scored 74%,
        with findings on wire tension control and lot traceability.""", """
        SOP-009 escalation levels. Level 1: supplier 8D. Level 2: controlled shipping with third-party
        sorting at the supplier's cost. Level 3: new business hold and notification of the vehicle
        manufacturer. The pressure sensor supplier is currently at level 1 following the high-temperature
        offset drift.""",
        restricted=(0, 1, 2)),
    doc("SOP-010", """
        SOP-010 FMEA and hazard analysis procedure. Purpose: defines how Globex performs design and process
        FMEA according to the AIAG-VDA handbook, and the hazard analysis and risk assessment (HARA)
        according to ISO 26262 part 3. Each analysed failure mode or hazardous event is recorded as a RISK
        item.""", """
        SOP-010 procedure. In the HARA, hazardous events are rated for severity, exposure and
        controllability to determine the ASIL. In the FMEA, each failure is rated for severity, occurrence
        and detection and assigned an action priority of high, medium or low. High action priority items
        require actions or a documented justification signed by the product team leader.""", """
        SOP-010 maintenance. FMEAs are living documents, updated at each design or process change, after
        every confirmed field failure, and at least annually. The FMEA links failure modes to the
        requirements that prevent them and to the tests that detect them, so that coverage gaps are
        visible."""),
    # German version of SOP-007 for the Chemnitz plant (lang "de")
    doc("SOP-007-DE", """
        SOP-007 End-of-Line-Prüfung der EBC-7 (deutsche Fassung für das Werk Chemnitz). Zweck: beschreibt
        die 100-%-Endprüfung jeder Hydraulikeinheit vor der Verpackung: Evakuieren und Befüllen mit
        Bremsflüssigkeit DOT 4, Helium-Dichtheitsprüfung, elektrische Prüfung, Funktionsprüfung von
        Ventilen und Pumpe, Kalibrierung der Drucksensoren und Flashen der Kundenvariante.""", """
        SOP-007 Ablauf. Die Einheit wird auf unter 1 mbar evakuiert, mit DOT 4 befüllt und mit Helium bei
        30 bar auf Dichtheit geprüft. Die elektrische Prüfung umfasst Isolation, Spulenwiderstände und
        Sensoroffsets. Die Pumpe läuft 5 s, die Ventile werden geschaltet und der Druckverlauf wird mit der
        Referenzhüllkurve verglichen. Fehlerhafte Einheiten gehen automatisch zur Nacharbeit; höchstens
        zwei Wiederholprüfungen sind zulässig.""", lang="de", translation_of="SOP-007"),
]

GLOBEX_DEVIATIONS = [
    doc("DEV-001", """
        DEV-001 Solenoid coil resistance out of tolerance. Incoming inspection of coil lot 23-118 measured
        resistances of 3.62 to 3.70 Ω against a specification of 3.40 ± 0.15 Ω. A higher resistance reduces
        the coil current at low voltage and lengthens the valve switching time. 8000 coils were
        quarantined. Status: closed. Classification: major.""", """
        DEV-001 root cause and disposition. The coil supplier had changed its copper wire source; the new
        wire had a thinner insulation build, allowing more turns per coil because the winding machine
        controlled wire length rather than turns. Impact: units built before detection passed valve timing
        at end of line, with reduced margin at -40 °C and 9 V. Disposition: lot returned, supplier 8D
        requested, and coil resistance added as a 100% incoming check."""),
    doc("DEV-002", """
        DEV-002 Pressure sensor offset drift at high temperature. During operating tests at 105 °C, one of
        three units showed a master cylinder pressure sensor offset of +3.1 bar, outside the ±2 bar
        accuracy limit. The offset returned to +0.4 bar at 20 °C. Status: closed. Classification:
        major.""", """
        DEV-002 root cause and disposition. Supplier analysis found that the temperature compensation
        coefficients of the affected sensor batch had been calibrated at two temperatures instead of
        three. Impact: EBD and brake light switching thresholds could shift slightly at high temperature;
        no effect on ABS. Disposition: sensors from the batch replaced, and the supplier now calibrates at
        -40, 25 and 125 °C under enhanced surveillance."""),
    doc("DEV-003", """
        DEV-003 Return line filter occlusion by machining chips. Three units failed the end-of-line pump
        function test because the pressure response was too slow. Teardown found the return line filter
        screen in the valve block occluded by aluminium chips up to 900 µm long, above the technical
        cleanliness limit. Status: closed. Classification: major.""", """
        DEV-003 root cause and disposition. A worn deburring tool in machining cell 4 produced long chips
        that the washer did not remove because one spray nozzle was blocked. Impact: the end-of-line test
        detected all affected units, and nothing was shipped. Disposition: 46 valve blocks from the shift
        scrapped, tool life reduced, and a nozzle check added to the shift start checklist. Cleanliness
        sampling was increased to two blocks per shift for one month."""),
    doc("DEV-004", """
        DEV-004 False CAN timeout at high bus load. In HIL testing with 70% bus load, software 4.0.0
        reported timeouts of the steering angle message although the message was present, which degraded
        ESC for 1 s each time. The effect was not seen at the nominal bus load of 45%. Status: closed.
        Classification: major.""", """
        DEV-004 root cause and disposition. The receive interrupt was disabled during long flash writes of
        the fault memory, so two consecutive frames were lost and the timeout timer expired. Fix in
        software 4.0.2: fault memory writes are split into blocks of 64 bytes with interrupts enabled in
        between. HIL regression passed and the affected vehicle tests were repeated."""),
    doc("DEV-005", """
        DEV-005 Expired calibration on an end-of-line pressure transducer. On line 2, the pressure
        transducer used for the pump function test was found three weeks past its calibration due date
        during an internal audit. 6420 units had been tested in this period. Status: closed.
        Classification: major.""", """
        DEV-005 investigation and disposition. The transducer was calibrated immediately and found within
        tolerance, with a maximum error of 0.6 bar against a limit of 1 bar, so the test results remain
        valid. Root cause: the gauge management system sent reminders to an employee who had left the
        company. Action: reminders now go to a group mailbox, and the test station blocks when a
        calibration is overdue."""),
    doc("DEV-006", """
        DEV-006 Connector terminal push-back found at the vehicle plant. The vehicle manufacturer reported
        two vans at the end of their assembly line with an ABS fault code. Both had the wheel speed sensor
        terminal of pin 31 pushed back in the EBC-7 harness connector. Status: closed. Classification:
        major, customer complaint.""", """
        DEV-006 root cause and disposition. Analysis showed that the harness connector had been mated with
        its secondary lock only partially engaged, a handling issue at the vehicle plant, while the ECU
        header pins were within specification. Globex supported the customer's 8D and proposed a connector
        position assurance check with audible click detection. The Globex parts were conforming; closed as
        customer-caused."""),
    doc("DEV-007", """
        DEV-007 Elevated quiescent current with software 3.2.0. Sleep current measurement showed 180 µA
        instead of at most 100 µA on all units with software 3.2.0, because the CAN transceiver remained in
        standby instead of sleep mode. Two fleet customers reported flat vehicle batteries after 10 days
        of parking. Status: closed. Classification: major.""", """
        DEV-007 root cause and disposition. A configuration change in the communication stack disabled the
        transceiver sleep command whenever partial networking was deactivated. Fixed in software 3.2.1.
        Impact: 1900 vehicles in the field, reprogrammed at their next workshop visit through a service
        campaign. The sleep current test case was added to the HIL regression suite."""),
    doc("DEV-008", """
        DEV-008 Pump motor noise complaints. A vehicle manufacturer reported a growling noise during hill
        hold pre-fill on vans after about 20 000 km. Returned motors showed uneven brush wear and noise
        above the 45 dB(A) target at idle. Status: closed. Classification: minor, as braking performance
        was not affected.""", """
        DEV-008 root cause and disposition. The brush spring force was at the lower end of its tolerance on
        one motor supplier lot, causing brush bounce. The pre-fill pump control was changed to a softer
        start ramp, and the motor supplier tightened the spring force tolerance. No safety impact: the pump
        function was not degraded in any returned unit."""),
    doc("DEV-009", """
        DEV-009 Cracks in PCB potting after thermal shock. After 300 thermal shock cycles, two of six
        qualification units showed cracks up to 4 mm long in the potting compound around the power
        MOSFETs. The solder joints were intact. Status: open, under investigation. Classification:
        major.""", """
        DEV-009 investigation status. The potting compound supplier changed the filler material in 2024
        without notice, raising the glass transition temperature; the suspected consequence is higher
        stress at the MOSFET edges. Open questions: whether the cracks let moisture reach the board, and
        whether field units are affected. Samples are in humidity testing.""",
        restricted=(0, 1)),
    doc("DEV-010", """
        DEV-010 Unintended pressure above limit in a fault injection test. In HIL fault injection at
        130 km/h, the combination of a main path failure and pump run produced 7 bar at the front right
        caliper for 118 ms, exceeding the 100 ms limit for unrequested pressure. Status: open, under
        investigation. Classification: critical, safety goal SG-01.""", """
        DEV-010 investigation status. The independent monitoring circuit detected the pressure rise
        correctly, but its shut-off delay increases with the pump motor back-EMF at high motor speed. The
        vehicle-level impact is being assessed by the functional safety team; the deceleration at 7 bar
        for 118 ms is below 0.05 g. Release of software 4.1.0 to series production is on hold until the
        assessment is complete.""",
        restricted=(0, 1)),
    doc("DEV-011", """
        DEV-011 PCB delamination at the board supplier. The PCB supplier informed Globex that one panel lot
        showed delamination after reflow at its sister plant. Four panels from that lot had already been
        delivered and assembled into 48 ECUs. Status: open. Classification: major until the scope is
        confirmed.""", """
        DEV-011 investigation status. The 48 ECUs are blocked in the finished goods warehouse.
        Cross-sections of two ECUs show no delamination. Pending: the supplier's root cause analysis and a
        decision on sorting the remaining units with scanning acoustic microscopy before release.""",
        restricted=(0, 1)),
    doc("DEV-012", """
        DEV-012 Red rust at brake pipe port threads after salt spray. Two of three units showed red rust
        spots at the M12 port threads after 480 h of neutral salt spray, before the required 720 h. The
        sealing surfaces were not affected. Status: open. Classification: major.""", """
        DEV-012 investigation status. The port thread area is left uncoated after machining; the
        zinc-nickel coating is on the pipe nuts only. Options under evaluation: coated pipe nuts with a
        longer sealing collar, or a post-machining passivation of the valve block. A re-test with new
        samples is planned.""",
        restricted=(1,)),
    # German deviation from the Chemnitz plant (lang "de")
    doc("DEV-013", """
        DEV-013 Abweichung: Helium-Dichtheitsprüfung mit falschem Grenzwert (Werk Chemnitz). Nach einem
        Software-Update der Prüfanlage an Linie 3 wurde die Helium-Leckrate drei Schichten lang mit dem
        Grenzwert 1×10⁻³ statt 1×10⁻⁴ mbar·l/s bewertet. Betroffen sind 2150 Einheiten, davon 1400 bereits
        an den Kunden ausgeliefert. Status: abgeschlossen. Einstufung: schwerwiegend.""", """
        DEV-013 Ursache und Entscheidung. Beim Update wurde der Parametersatz einer anderen Variante
        geladen; das Vier-Augen-Prinzip für Parameteränderungen war nicht eingehalten. Die gespeicherten
        Messwerte aller 2150 Einheiten lagen unter 1×10⁻⁴ mbar·l/s, daher keine Auswirkung auf ausgelieferte
        Teile. Maßnahme: Parameterfreigabe im Prüfstandssystem nur mit zweiter Unterschrift, Schulung nach
        SOP-007.""", lang="de"),
]

GLOBEX_RISKS = [
    doc("RISK-001", """
        RISK-001 Wheel lock during emergency braking. Hazardous event: loss of steerability while braking
        hard on a low-friction road because ABS is not available. Cause: ECU fault, wheel speed sensor
        failure or valve fault. Rating: severity S3, exposure E4, controllability C2, giving ASIL B for
        this event. Measures: sensor and valve diagnostics, EBD kept in degraded mode, and a driver
        warning so that the driver can adapt."""),
    doc("RISK-002", """
        RISK-002 Unintended braking at high speed. Hazardous event: sudden braking of one or more wheels
        without driver request on a motorway, causing a rear-end collision or loss of control. Cause: pump
        or valve command fault, a corrupted request message, or a software error. Rating: S3, E4, C3,
        giving ASIL D and safety goal SG-01. Measures: plausibility checks on requests, a lockstep
        microcontroller and an independent pressure monitoring shut-off."""),
    doc("RISK-003", """
        RISK-003 Partial loss of braking. Hazardous event: reduced deceleration after a leak in one brake
        circuit. Cause: pipe or seal failure, or external leakage at a modulator port. Severity S3.
        Measures: a dual-circuit hydraulic layout, detection of the circuit failure with a red warning and
        an acoustic signal so that the driver stops safely, and a helium leak test at end of line."""),
    doc("RISK-004", """
        RISK-004 Driver not informed of degraded braking. Hazardous event: the driver continues at high
        speed relying on ABS or ESC that a fault has disabled. Cause: a missing telltale request, an
        instrument cluster fault or a skipped bulb check. Measures: a redundant hard-wired red telltale, the
        bulb check at ignition on, and latching of warnings for the ignition cycle."""),
    doc("RISK-005", """
        RISK-005 Incorrect wheel speed. Hazardous event: ABS releases pressure unnecessarily, extending the
        stopping distance. Cause: a damaged tone wheel, an air gap that is too large, or electromagnetic
        interference on the sensor line. Measures: plausibility checks between wheels, signal quality
        monitoring, immunity by design, and a limited release time when a single wheel behaves
        implausibly."""),
    doc("RISK-006", """
        RISK-006 ECU reset during braking. Hazardous event: loss of ABS during an emergency stop on a cold
        morning. Cause: a supply voltage dip during an engine restart by the stop-start system, or the high
        inrush current of the pump motor. Measures: defined voltage thresholds, brown-out detection, a pump
        soft start, and cranking profile robustness verified on the bench."""),
    doc("RISK-007", """
        RISK-007 Vehicle battery drained while parked. Not a safety hazard but a high-impact customer
        failure mode: the van does not start after a parking period. Cause: the ECU does not enter sleep
        mode, or spurious wake-ups occur on the CAN bus. FMEA rating: severity 7, occurrence 3, detection 4,
        action priority medium. Measures: the quiescent current requirement and a sleep current test in the
        HIL regression."""),
    doc("RISK-008", """
        RISK-008 ESC over-intervention. Hazardous event: excessive braking of a single wheel in a curve
        induces a yaw disturbance. Cause: a wrong yaw rate sensor offset or an incorrect vehicle parameter
        set. Measures: sensor offset learning with plausibility limits, a variant coding check at end of
        line, and a limit on the intervention pressure gradient."""),
    doc("RISK-009", """
        RISK-009 Water ingress into the ECU. Failure mode: short circuit or corrosion on the PCB after
        high-pressure washing or driving through deep water. Effect: loss of ABS and ESC with a warning to
        the driver. FMEA severity 8. Measures: IP6K9K sealing, a breather membrane and conformal coating of
        the PCB, validated by high-pressure jet testing."""),
    doc("RISK-010", """
        RISK-010 Valve stuck due to corrosion or contamination. Failure mode: an inlet valve does not
        reopen, preventing pressure build-up at one wheel. Effect: reduced braking and reduced yaw moment.
        Measures: technical cleanliness limits for the valve block, filter screens, corrosion-resistant
        materials, and a valve function check during each ignition-on self-test."""),
    doc("RISK-011", """
        RISK-011 Electromagnetic disturbance. Failure mode: a false wheel speed or false valve actuation
        caused by radiated fields from radio transmitters or by conducted disturbances on the supply.
        Effect: unintended release or build-up of pressure. Measures: EMC design of filters and layout,
        shielded sensor lines where required, and immunity testing at 100 V/m."""),
    doc("RISK-012", """
        RISK-012 Spoofed brake request on the vehicle network. Threat scenario: an attacker with access to
        the OBD port or a compromised telematics unit injects brake request messages. Impact: unintended
        braking and loss of customer trust. Measures: SecOC message authentication, gateway filtering,
        security access for diagnostics, and secure boot to prevent manipulated software."""),
    doc("RISK-013", """
        RISK-013 ECU unusable after an interrupted software update. Failure mode: a supply loss during
        reprogramming leaves invalid software in the flash memory. Effect: the vehicle cannot be driven
        with full braking functions and has to be towed. Measures: reprogramming preconditions, a fallback
        image, and a bootloader that stays active after any interruption."""),
    doc("RISK-014", """
        RISK-014 Pump motor overheating. Failure mode: long ESC or hill hold activity overheats the motor
        windings, leading to motor failure. Effect: loss of active pressure build-up. Measures: a software
        thermal model of the motor, duty cycle limitation, and temperature-dependent derating with driver
        information when the function is reduced."""),
    doc("RISK-015", """
        RISK-015 Vehicle rolls back on a slope. Hazardous event: an unexpected roll-back during a hill start
        causes a collision with a pedestrian or a vehicle behind. Cause: hill hold releases too early or
        does not engage. Measures: hold time and release conditions based on drive torque, gradient
        estimation, and driver information that hill hold is active."""),
    doc("RISK-016", """
        RISK-016 Pressure sensor drift. Failure mode: the master cylinder pressure reading is offset at
        temperature. Effect: a wrong brake light activation threshold and a wrong brakeforce distribution at
        low pressures. Measures: a dual-channel sensor with opposite slopes, offset learning at standstill,
        and three-point temperature calibration at the sensor supplier."""),
    doc("RISK-017", """
        RISK-017 Contamination in the hydraulic unit. Failure mode: particles from machining or assembly
        lodge in valve seats or block filter screens, causing internal leakage or a slow pressure response.
        Effect: reduced ABS performance. Measures: VDA 19 cleanliness control, filter screens, and the
        end-of-line pressure response test."""),
    doc("RISK-018", """
        RISK-018 Intermittent connector contact. Failure mode: fretting corrosion or incomplete mating of
        the 46-pin connector. Effect: intermittent sensor signals, fault codes and warnings, and possible
        loss of ABS. Measures: a sealed connector with secondary lock, gold-plated signal terminals, and
        connector position assurance at the vehicle plant."""),
    doc("RISK-019", """
        RISK-019 Solder joint fatigue. Failure mode: cracks in the solder joints of large components after
        thermal cycling in the engine compartment. Effect: intermittent loss of function and possible ECU
        reset. Measures: thermal shock and power cycling qualification, underfill of the BGA, and
        cross-section analysis of qualification samples."""),
    doc("RISK-020", """
        RISK-020 Loosening of valve block fasteners under vibration. Failure mode: bracket or valve block
        screws lose their preload. Effect: noise, stress on the brake pipes and eventually leakage.
        Measures: a thread-locking patch, torque-controlled assembly, and vibration testing with breakaway
        torque measurement."""),
]

GLOBEX_EDGES = """
# test protocol -> requirement it verifies
TP-030#0 VERIFIES REQ-010#0
TP-030#2 VERIFIES REQ-010#1
TP-030#2 VERIFIES REQ-011#0
TP-031#1 VERIFIES REQ-012#0
TP-031#2 VERIFIES REQ-012#0
TP-032#1 VERIFIES REQ-001#1
TP-032#2 VERIFIES REQ-001#0
TP-033#2 VERIFIES REQ-002#0
TP-033#2 VERIFIES REQ-003#0
TP-034#2 VERIFIES REQ-004#0
TP-035#2 VERIFIES REQ-006#0
TP-035#2 VERIFIES REQ-008#0
TP-036#2 VERIFIES REQ-014#0
TP-036#1 VERIFIES REQ-014#1
TP-036#2 VERIFIES REQ-015#0
TP-037#2 VERIFIES REQ-016#0
TP-038#2 VERIFIES REQ-017#0
TP-038#2 VERIFIES REQ-018#0
TP-039#2 VERIFIES REQ-019#0
TP-039#2 VERIFIES REQ-022#0
TP-040#2 VERIFIES REQ-020#0
TP-040#2 VERIFIES REQ-023#0
TP-041#2 VERIFIES REQ-021#0
TP-042#2 VERIFIES REQ-024#0
TP-043#1 VERIFIES REQ-027#1
TP-043#2 VERIFIES REQ-027#0
TP-044#2 VERIFIES REQ-029#0
TP-045#2 VERIFIES REQ-030#0
TP-046#2 VERIFIES REQ-007#0
TP-047#2 VERIFIES REQ-033#0

# requirement -> parent requirement or the SOP that specifies it
REQ-003#0 SPECIFIED_BY REQ-002#0
REQ-006#0 SPECIFIED_BY REQ-005#0
REQ-011#0 SPECIFIED_BY REQ-010#0
REQ-012#0 SPECIFIED_BY REQ-010#1
REQ-013#0 SPECIFIED_BY REQ-026#0
REQ-015#0 SPECIFIED_BY REQ-014#0
REQ-016#0 SPECIFIED_BY REQ-014#0
REQ-017#0 SPECIFIED_BY REQ-014#1
REQ-018#0 SPECIFIED_BY REQ-014#0
REQ-027#0 SPECIFIED_BY REQ-026#0
REQ-028#0 SPECIFIED_BY REQ-001#0
REQ-029#0 SPECIFIED_BY REQ-001#0
REQ-031#0 SPECIFIED_BY REQ-026#0
REQ-037#0 SPECIFIED_BY REQ-026#0
REQ-009#0 SPECIFIED_BY SOP-007#1
REQ-026#0 SPECIFIED_BY SOP-010#1
REQ-031#0 SPECIFIED_BY SOP-008#0
REQ-033#0 SPECIFIED_BY SOP-008#1
REQ-034#0 SPECIFIED_BY SOP-004#0
REQ-035#0 SPECIFIED_BY SOP-007#1
REQ-040#0 SPECIFIED_BY SOP-001#2

# requirement or test protocol -> deviation that affects it
REQ-029#0 IMPACTED_BY DEV-001#0
TP-044#2 IMPACTED_BY DEV-001#1
REQ-009#0 IMPACTED_BY DEV-002#0
TP-039#2 IMPACTED_BY DEV-002#1
REQ-001#0 IMPACTED_BY DEV-003#0
REQ-035#0 IMPACTED_BY DEV-003#1
REQ-024#0 IMPACTED_BY DEV-004#0
TP-042#2 IMPACTED_BY DEV-004#1
REQ-035#0 IMPACTED_BY DEV-005#0
REQ-039#0 IMPACTED_BY DEV-006#0
REQ-016#0 IMPACTED_BY DEV-007#0
TP-037#2 IMPACTED_BY DEV-007#1
REQ-036#0 IMPACTED_BY DEV-008#0
REQ-028#0 IMPACTED_BY DEV-008#1
REQ-022#0 IMPACTED_BY DEV-009#0
TP-039#2 IMPACTED_BY DEV-009#0
REQ-027#0 IMPACTED_BY DEV-010#0
TP-043#2 IMPACTED_BY DEV-010#1
REQ-022#0 IMPACTED_BY DEV-011#0
REQ-023#0 IMPACTED_BY DEV-012#0
TP-040#2 IMPACTED_BY DEV-012#1
REQ-035#0 IMPACTED_BY DEV-013#0

# requirement -> risk item it mitigates
REQ-002#0 MITIGATES RISK-001#0
REQ-004#0 MITIGATES RISK-008#0
REQ-005#0 MITIGATES RISK-005#0
REQ-006#0 MITIGATES RISK-001#0
REQ-006#0 MITIGATES RISK-005#0
REQ-007#0 MITIGATES RISK-015#0
REQ-009#0 MITIGATES RISK-016#0
REQ-010#0 MITIGATES RISK-004#0
REQ-011#0 MITIGATES RISK-004#0
REQ-012#0 MITIGATES RISK-003#0
REQ-013#0 MITIGATES RISK-001#0
REQ-014#1 MITIGATES RISK-006#0
REQ-015#0 MITIGATES RISK-006#0
REQ-016#0 MITIGATES RISK-007#0
REQ-019#0 MITIGATES RISK-014#0
REQ-020#0 MITIGATES RISK-009#0
REQ-021#0 MITIGATES RISK-020#0
REQ-022#0 MITIGATES RISK-019#0
REQ-023#0 MITIGATES RISK-010#0
REQ-027#0 MITIGATES RISK-002#0
REQ-027#1 MITIGATES RISK-002#0
REQ-028#0 MITIGATES RISK-014#0
REQ-030#0 MITIGATES RISK-011#0
REQ-032#0 MITIGATES RISK-012#0
REQ-033#0 MITIGATES RISK-013#0
REQ-034#0 MITIGATES RISK-017#0
REQ-035#0 MITIGATES RISK-003#0
REQ-037#0 MITIGATES RISK-002#0
REQ-039#0 MITIGATES RISK-018#0

# SOP -> SOP it refers to
SOP-001#1 REFERENCES SOP-008#1
SOP-002#2 REFERENCES SOP-010#2
SOP-003#2 REFERENCES SOP-002#0
SOP-004#2 REFERENCES SOP-005#0
SOP-005#2 REFERENCES SOP-002#0
SOP-006#2 REFERENCES SOP-005#0
SOP-007#0 REFERENCES SOP-004#0
SOP-007#1 REFERENCES SOP-006#1
SOP-008#0 REFERENCES SOP-001#0
SOP-009#2 REFERENCES SOP-002#0
SOP-010#2 REFERENCES SOP-001#0
SOP-007-DE#0 REFERENCES SOP-007#0
SOP-007-DE#1 REFERENCES SOP-007#1
"""

GLOBEX_ENTITIES = {
    "warning-telltale": r"telltale|chime|red lamp|bulb check",
    "wheel-speed-sensor": r"wheel speed|tone wheel",
    "pressure-sensor": r"pressure sensor|master cylinder pressure|Drucksensor",
    "solenoid-valve": r"solenoid|inlet valve|outlet valve|coil|valve needle",
    "pump-motor": r"pump motor|return pump|brush|pre-fill",
    "microcontroller": r"lockstep|microcontroller|watchdog",
    "bootloader": r"bootloader|programming|flashing|Flashen",
    "can-transceiver": r"(?-i:\bCAN\b)|transceiver|bus load|restbus",
    "vehicle-battery": r"vehicle battery|starter battery|supply voltage|quiescent|sleep current|reverse polarity|load dump",
    "connector": r"connector|terminal|pin 31",
    "valve-block": r"valve block|hydraulic (unit|modulator)|brake pipe port|Hydraulikeinheit",
    "brake-fluid": r"brake fluid|DOT 4|Bremsflüssigkeit",
    "pcb": r"\bPCB\b|solder|potting|MOSFET|delamination",
    "hil-bench": r"\bHIL\b|hardware-in-the-loop",
    "yaw-rate-sensor": r"\byaw\b|inertial measurement|lateral acceleration",
    "hill-hold": r"hill hold|\bslopes?\b|roll-back",
    "climatic-chamber": r"climatic chamber|thermal shock|temperature chamber",
    "diagnostic-tester": r"diagnostic tester|\btester\b|trouble code|\bDTCs?\b",
    "end-of-line-tester": r"end-of-line|first-pass yield|Endprüfung|Prüfanlage|Prüfstand",
    "gauge-management": r"\bgauges?\b|calibrat",
    "fmea": r"\bFMEAs?\b|\bHARA\b",
    "8d-report": r"\b8D\b",
    "field-returns": r"warranty|returned|field return",
    "deviation-permit": r"deviation permit|quarantine",
    "software-release": r"bill of materials|release history|software release",
}

GLOBEX = Tenant("globex", "StopSure EBC-7",
                GLOBEX_REQUIREMENTS + GLOBEX_TEST_PROTOCOLS + GLOBEX_SOPS + GLOBEX_DEVIATIONS + GLOBEX_RISKS,
                GLOBEX_EDGES, GLOBEX_ENTITIES)

TENANTS = [ACME, GLOBEX]


# ---------------------------------------------------------------------------
# Demo queries: "expect" lists chunk ids that a good hybrid retriever with 1-hop
# graph expansion from its top hits should return in its top 10.
# ---------------------------------------------------------------------------

QUERIES = [
    {
        "tenant": "acme",
        "text": "How quickly must the pump alarm after a downstream occlusion?",
        "why": "Text search finds requirement REQ-012; its verifying protocol TP-031 talks about a pressure "
               "ramp, a patient-side clamp and a stopwatch, shares almost no words with it, and is reached "
               "only through the VERIFIES edge.",
        "expect": ["acme:REQ-012#0", "acme:TP-031#2"],
    },
    {
        "tenant": "acme",
        "text": "DEV-007",
        "why": "An exact document identifier: lexical search ranks the DEV-007 chunks (and the test report "
               "that cites DEV-007) first, while dense search only sees a short string without meaning.",
        "expect": ["acme:DEV-007#0", "acme:DEV-007#1"],
    },
    {
        "tenant": "acme",
        "text": "How long does it last unplugged?",
        "why": "A paraphrase with no keyword in common with the battery run-time requirement: dense search "
               "finds it, lexical search does not.",
        "expect": ["acme:REQ-020#0"],
    },
    {
        "tenant": "acme",
        "text": "What verifies the alarm requirement?",
        "why": "The same generic question as for globex: acme answers with its IEC 60601-1-8 alarm system "
               "requirement and alarm test protocol, never with globex documents.",
        "expect": ["acme:REQ-010#0", "acme:TP-030#0"],
    },
    {
        "tenant": "globex",
        "text": "What verifies the alarm requirement?",
        "why": "The same generic question as for acme: globex answers with its driver warning requirement "
               "and HIL warning test, never with acme documents.",
        "expect": ["globex:REQ-010#0", "globex:TP-030#0"],
    },
    {
        "tenant": "acme",
        "text": "SOP-004 cleaning and disinfection agents",
        "filter": {"lang": "en"},
        "why": "Without a filter the German translation SOP-004-DE also ranks near the top; the metadata "
               "filter {\"lang\": \"en\"} keeps only the English procedure.",
        "expect": ["acme:SOP-004#0", "acme:SOP-004#1"],
    },
    {
        "tenant": "globex",
        "text": "Why did vans not start after sitting in the car park for a week and a half?",
        "why": "A symptom in everyday words: dense search finds the parked-battery risk and deviation, and "
               "the graph adds the quiescent current requirement both of them link to.",
        "expect": ["globex:RISK-007#0", "globex:DEV-007#0", "globex:REQ-016#0"],
    },
    {
        "tenant": "globex",
        "text": "occlusion",
        "why": "One keyword, two meanings: in globex it finds a filter screen blocked by machining chips, "
               "not an infusion line, because each tenant only sees its own corpus.",
        "expect": ["globex:DEV-003#0"],
    },
]

# Protocols that must be found through the graph, not by text: words they must not contain.
GRAPH_ONLY_WORDS = {
    ("acme", "TP-031"): ["occlusion", "alarm", "downstream"],
    ("globex", "TP-031"): ["hydraulic", "circuit", "failure", "warning", "alarm", "telltale"],
}


# ---------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------

def build_chunks(tenant: Tenant) -> list[dict]:
    rows = []
    for d in tenant.docs:
        sections = SECTIONS[d.doc_type]
        status = None
        if d.doc_type == "deviation":
            m = re.search(r"Status: (open|closed|abgeschlossen)", d.chunks[0])
            assert m, f"{d.code}: deviation without a status"
            status = "open" if m.group(1) == "open" else "closed"
        for pos, content in enumerate(d.chunks):
            metadata = {
                "doc_type": d.doc_type,
                "doc_code": d.code,
                "title": d.title,
                "lang": d.lang,
                "product": tenant.product,
                "section": sections[pos] if pos < len(sections) else f"part {pos + 1}",
            }
            if status:
                metadata["status"] = status
            for key, value in d.extra.items():
                metadata[key] = f"{tenant.name}:{value}" if key == "translation_of" else value
            rows.append({
                "chunk_id": f"{tenant.name}:{d.code}#{pos}",
                "document_id": f"{tenant.name}:{d.code}",
                "position": pos,
                "content": content,
                "metadata": metadata,
                "acl_labels": [ACL_LABEL] if pos in d.restricted else [],
            })
    return rows


def build_edges(tenant: Tenant, chunks: list[dict]) -> list[dict]:
    edges = []
    for line in tenant.edges.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        src, rel, dst = line.split()
        edges.append({"src": f"{tenant.name}:{src}", "dst": f"{tenant.name}:{dst}", "rel": rel})
    patterns = {name: re.compile(rx, re.IGNORECASE) for name, rx in tenant.entities.items()}
    for c in chunks:
        hits = [name for name, rx in patterns.items() if rx.search(c["content"])]
        for name in hits[:MAX_MENTIONS_PER_CHUNK]:
            edges.append({"src": c["chunk_id"], "dst": f"{tenant.name}:entity:{name}", "rel": "MENTIONS"})
    return edges


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------

def words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+(?:[-'][^\W_]+)*", text.lower())


def validate_tenant(name: str, chunks: list[dict], edges: list[dict]) -> tuple[list[str], dict]:
    problems: list[str] = []
    ids = [c["chunk_id"] for c in chunks]
    id_set = set(ids)
    if len(ids) != len(id_set):
        problems.append(f"{name}: duplicate chunk ids")
    if not 150 <= len(chunks) <= 200:
        problems.append(f"{name}: {len(chunks)} chunks, expected 150-200")
    doc_type = {}
    for c in chunks:
        cid = c["chunk_id"]
        if list(c) != ["chunk_id", "document_id", "position", "content", "metadata", "acl_labels"]:
            problems.append(f"{cid}: unexpected keys {list(c)}")
        if not cid.startswith(f"{name}:") or cid != f"{c['document_id']}#{c['position']}":
            problems.append(f"{cid}: id does not match tenant/document/position")
        n = len(c["content"].split())
        if not MIN_WORDS <= n <= MAX_WORDS:
            problems.append(f"{cid}: {n} words, expected {MIN_WORDS}-{MAX_WORDS}")
        if c["acl_labels"] not in ([], [ACL_LABEL]):
            problems.append(f"{cid}: unexpected acl_labels {c['acl_labels']}")
        md = c["metadata"]
        if md.get("lang") not in ("en", "de") or not md.get("title") or md.get("doc_type") not in SECTIONS:
            problems.append(f"{cid}: incomplete metadata {md}")
        doc_type[cid] = md["doc_type"]
    positions: dict[str, list[int]] = {}
    for c in chunks:
        positions.setdefault(c["document_id"], []).append(c["position"])
    for d, pos in positions.items():
        if pos != list(range(len(pos))):
            problems.append(f"{d}: positions {pos} are not 0..n-1")

    seen = set()
    degree = {cid: 0 for cid in ids}
    entities = set()
    for e in edges:
        key = (e["src"], e["rel"], e["dst"])
        if list(e) != ["src", "dst", "rel"]:
            problems.append(f"edge {key}: unexpected keys")
        if key in seen:
            problems.append(f"edge {key}: duplicate")
        seen.add(key)
        if e["rel"] not in RELATIONS:
            problems.append(f"edge {key}: unknown relation")
            continue
        if e["src"] == e["dst"]:
            problems.append(f"edge {key}: self loop")
        kinds = []
        for node in (e["src"], e["dst"]):
            if not node.startswith(f"{name}:"):
                problems.append(f"edge {key}: {node} is not in tenant {name}")
            if ":entity:" in node:
                entities.add(node)
                kinds.append("entity")
            elif node in id_set:
                degree[node] += 1
                kinds.append(doc_type[node])
            else:
                problems.append(f"edge {key}: {node} is neither a chunk nor an entity")
                kinds.append("?")
        allowed_src, allowed_dst = REL_TYPES[e["rel"]]
        if kinds[0] not in allowed_src or kinds[1] not in allowed_dst:
            problems.append(f"edge {key}: {e['rel']} does not connect {kinds[0]} -> {kinds[1]}")

    for (tenant, code), banned in GRAPH_ONLY_WORDS.items():
        if tenant != name:
            continue
        for c in chunks:
            if c["document_id"] == f"{name}:{code}":
                shared = sorted(set(banned) & set(words(c["content"])))
                if shared:
                    problems.append(f"{c['chunk_id']}: graph-only protocol uses {shared}")

    isolated = [cid for cid, d in degree.items() if d == 0]
    if isolated:
        problems.append(f"{name}: chunks without any edge: {isolated}")
    word_counts = [len(c["content"].split()) for c in chunks]
    stats = {
        "documents": len(positions),
        "chunks": len(chunks),
        "edges": len(edges),
        "edges_by_rel": {r: sum(e["rel"] == r for e in edges) for r in sorted(RELATIONS)},
        "entities": len(entities),
        "acl_restricted": sum(bool(c["acl_labels"]) for c in chunks),
        "german": sum(c["metadata"]["lang"] == "de" for c in chunks),
        "edges_per_chunk": round(sum(degree.values()) / len(chunks), 2),
        "max_chunk_degree": max(degree.values()),
        "words_min_mean_max": (min(word_counts), round(sum(word_counts) / len(word_counts)), max(word_counts)),
    }
    return problems, stats


def validate_queries(queries: list[dict], chunks_by_tenant: dict[str, list[dict]]) -> list[str]:
    problems = []
    if not 6 <= len(queries) <= 8:
        problems.append(f"{len(queries)} queries, expected 6-8")
    for q in queries:
        if not {"tenant", "text", "why", "expect"} <= set(q):
            problems.append(f"query {q.get('text')!r}: missing keys")
            continue
        known = {c["chunk_id"]: c for c in chunks_by_tenant.get(q["tenant"], [])}
        for cid in q["expect"]:
            c = known.get(cid)
            if c is None:
                problems.append(f"query {q['text']!r}: expected {cid} is not a {q['tenant']} chunk")
            elif c["acl_labels"]:
                problems.append(f"query {q['text']!r}: expected {cid} is ACL-restricted")
            elif "filter" in q and any(c["metadata"].get(k) != v for k, v in q["filter"].items()):
                problems.append(f"query {q['text']!r}: expected {cid} does not pass the filter")
    return problems


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------

def to_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def generate() -> dict[str, str]:
    files = {}
    for t in TENANTS:
        chunks = build_chunks(t)
        files[f"{t.name}_chunks.jsonl"] = to_jsonl(chunks)
        files[f"{t.name}_edges.jsonl"] = to_jsonl(build_edges(t, chunks))
    files["queries.json"] = json.dumps(QUERIES, ensure_ascii=False, indent=2) + "\n"
    return files


def load_jsonl(text: str, fname: str) -> list[dict]:
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{fname}:{i}: not JSON: {exc}") from None
    return rows


def check(files: dict[str, str]) -> bool:
    ok = True
    chunks_by_tenant = {}
    for t in TENANTS:
        chunks = load_jsonl(files[f"{t.name}_chunks.jsonl"], f"{t.name}_chunks.jsonl")
        edges = load_jsonl(files[f"{t.name}_edges.jsonl"], f"{t.name}_edges.jsonl")
        chunks_by_tenant[t.name] = chunks
        problems, stats = validate_tenant(t.name, chunks, edges)
        print(f"{t.name}: {json.dumps(stats, ensure_ascii=False)}")
        for p in problems:
            print(f"  PROBLEM {p}")
        ok = ok and not problems
    problems = validate_queries(json.loads(files["queries.json"]), chunks_by_tenant)
    for p in problems:
        print(f"  PROBLEM {p}")
    return ok and not problems


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        on_disk = {name: (OUT_DIR / name).read_text(encoding="utf-8") for name in generate()}
        ok = check(on_disk)
        stale = [name for name, text in generate().items() if on_disk[name] != text]
        if stale:
            print(f"files differ from this generator's output: {stale}")
        return 0 if ok and not stale else 1
    if argv[1:]:
        print(__doc__)
        return 2
    files = generate()
    if not check(files):
        print("validation failed; nothing written")
        return 1
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT_DIR / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files to {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
