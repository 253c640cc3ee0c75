# ruff: noqa: E501  (one case a row reads better than wrapped)
"""The cases of ``bench/memory_abilities.py``: five abilities of a long-term memory, in the
manner of LongMemEval, each in two halves. ``TUNING`` may be looked at while choosing
prompts and thresholds; ``HELD_OUT`` is written in fresh words (other facts, other
phrasings) and nothing is tuned on it: only its figures count.

A case is planted messages (role, content), in the order they are said, a question asked
much later, the planted messages the prompt must hold (all of them), and the answers
that count as right (any of them, lowercase substrings of the reply). For ``updates``
the last planted message is the current value and the earlier ones are stale. For
``abstention`` nothing answers the question (the planted message is a distractor) and
the right reply says it does not know.
"""

from dataclasses import dataclass, field

U, A = "user", "assistant"
ABSTAIN = ("don't know", "do not know", "not sure", "no idea", "haven't", "have not", "didn't",
           "did not", "never", "not mentioned", "can't", "cannot", "don't have", "no record",
           "not told", "unknown")  # fmt: skip


@dataclass(frozen=True)
class Case:
    ability: str
    planted: tuple[tuple[str, str], ...]
    question: str
    answers: tuple[str, ...] = ()
    needed: tuple[str, ...] = field(default=())  # contents that must be in the prompt

    @property
    def must_find(self) -> tuple[str, ...]:
        if self.ability == "abstention":
            return ()
        if self.ability == "updates":
            return (self.planted[-1][1],)
        return self.needed or tuple(content for _, content in self.planted)


def _user(*contents: str) -> tuple[tuple[str, str], ...]:
    return tuple((U, content) for content in contents)


def _said(lead: str, reply: str) -> tuple[tuple[str, str], ...]:
    return ((U, lead), (A, reply))


TUNING = [
    # extraction: a fact said once
    Case("extraction", _user("My locker at the gym is number 317."),
         "What's my gym locker number?", ("317",)),
    Case("extraction", _user("My dentist is Dr. Halvorsen on Pine Street."),
         "Who is my dentist?", ("halvorsen",)),
    Case("extraction", _user("I take my coffee with oat milk and no sugar."),
         "How do I like my coffee?", ("oat",)),
    Case("extraction", _user("The spare key is under the blue flowerpot by the back door."),
         "Where did I hide the spare key?", ("flowerpot",)),
    Case("extraction", _user("My passport expires in November 2027."),
         "When does my passport run out?", ("2027",)),
    Case("extraction", _user("I work as a radiographer at the county hospital."),
         "What is my job?", ("radiographer",)),
    # multi-session: facts joined by a name, said far apart
    Case("multi_session", _user("My sister is Ana.", "Ana's birthday is 3 May.", "Ana lives in Oslo."),
         "When should I send a card to my sister and to which city?", ("oslo",)),
    Case("multi_session", _user("My best friend from school is Tomasz.",
                                "Tomasz just started a job as a pilot.", "Tomasz has two daughters."),
         "What does my school friend do for work and how many kids does he have?", ("pilot",)),
    Case("multi_session", _user("My manager is called Priya.", "Priya prefers reports on Fridays.",
                                "Priya is allergic to peanuts."),
         "When does my boss want reports, and what can't she eat?", ("friday",)),
    Case("multi_session", _user("Our dog is named Biscuit.", "Biscuit eats salmon kibble only.",
                                "Biscuit's vet is Dr. Moreau."),
         "What food does our dog eat, and who is his vet?", ("salmon",)),
    Case("multi_session", _user("My neighbour is Gustavo.", "Gustavo plays the cello in an orchestra."),
         "What instrument does my neighbour play?", ("cello",)),
    Case("multi_session", _user("My grandmother is Helga.", "Helga turns ninety in October.",
                                "Helga lives in a care home in Bergen."),
         "How old is my grandmother turning and where does she live?", ("ninety", "90")),
    # updates: the last planted message is current
    Case("updates", _user("I live in Lyon.", "Lyon is where I live, near the river.",
                          "Home for me is Lyon.", "I moved to Porto last month."),
         "Where do I live now?", ("porto",)),
    Case("updates", _user("My phone number is 0612 334 901.",
                          "New phone number: 0699 120 555, the old one is gone."),
         "What's my phone number?", ("0699",)),
    Case("updates", _user("I drive a red Skoda Octavia.", "I sold the Skoda and bought a grey Volvo estate."),
         "What car do I drive?", ("volvo",)),
    Case("updates", _user("My gym membership is at FitZone.", "I switched gyms, I'm at Iron Temple now."),
         "Which gym am I a member of?", ("iron temple",)),
    Case("updates", _user("Our team meeting is on Mondays at 10.",
                          "The team meeting moved to Tuesdays at 2 pm."),
         "When is our team meeting?", ("tuesday",)),
    Case("updates", _user("My email is k.berg@mailbox.org.", "I changed my email to kberg.work@proton.me."),
         "What is my email address?", ("proton",)),
    # abstention: never said; the planted message is a distractor
    Case("abstention", _user("My best friend is Marek."), "What is my brother's name?", ABSTAIN),
    Case("abstention", _user("My sister's dog is a beagle."), "What breed is my cat?", ABSTAIN),
    Case("abstention", _user("I paid 1,200 euros for the sofa."),
         "How much did my new fridge cost?", ABSTAIN),
    Case("abstention", _user("I flew to Madrid in March."), "When did I last visit Tokyo?", ABSTAIN),
    Case("abstention", _user("My bank hotline PIN is 862209."),
         "What is my library card number?", ABSTAIN),
    Case("abstention", _user("I play tennis on Saturdays."),
         "Which position do I play in my football team?", ABSTAIN),
    # assistant-stated: the fact is in the assistant's reply
    Case("assistant", _said("Please place the order for the blender.", "Done. Your order number is 5521."),
         "What reference did you give me for my purchase?", ("5521",),
         ("Done. Your order number is 5521.",)),
    Case("assistant", _said("Can you book a table for Friday?",
                            "Booked: Trattoria Sole, Friday at 19:30, table 12."),
         "Which restaurant did you reserve for us?", ("sole",),
         ("Booked: Trattoria Sole, Friday at 19:30, table 12.",)),
    Case("assistant", _said("What's a good stretch for my lower back?",
                            "Try the cat-cow stretch, ten slow repetitions each morning."),
         "What exercise did you suggest for my back pain?", ("cat-cow", "cat cow"),
         ("Try the cat-cow stretch, ten slow repetitions each morning.",)),
    Case("assistant", _said("Convert 50 miles to kilometres.", "50 miles is about 80.5 kilometres."),
         "How far in km was that distance you worked out?", ("80.5",),
         ("50 miles is about 80.5 kilometres.",)),
    Case("assistant", _said("Suggest a name for my sourdough starter.",
                            "How about calling it Clint Yeastwood?"),
         "What did you propose I call my bread culture?", ("yeastwood",),
         ("How about calling it Clint Yeastwood?",)),
    Case("assistant", _said("Set a reminder for the insurance renewal.",
                            "Reminder set for 28 February at 9:00."),
         "For which date did you set my insurance alarm?", ("28",),
         ("Reminder set for 28 February at 9:00.",)),
]  # fmt: skip

HELD_OUT = [
    Case("extraction", _user("The storage unit I rent is number B-214."),
         "What number was the storage space I'm renting?", ("b-214", "b214")),
    Case("extraction", _user("My landlord's name is Mrs. Okonkwo."),
         "Who owns the flat I rent?", ("okonkwo",)),
    Case("extraction", _user("I'm training for a half marathon in Seville."),
         "Which city is my race in?", ("seville",)),
    Case("extraction", _user("My blood type is O negative."),
         "What blood group am I?", ("o negative", "o-negative", "o neg")),
    Case("extraction", _user("The cat's vet appointment is on Thursday at 4 pm."),
         "When is the vet visit for the cat?", ("thursday",)),
    Case("extraction", _user("I keep my tax documents in the grey filing cabinet."),
         "Where are my tax papers stored?", ("filing cabinet", "cabinet")),
    Case("multi_session", _user("My cousin is Rafael.", "Rafael is getting married in June.",
                                "Rafael's fiancée is from Lisbon."),
         "When is my cousin's wedding and where is his partner from?", ("june",)),
    Case("multi_session", _user("My piano teacher is Yuki.", "Yuki charges 40 euros a lesson.",
                                "Yuki teaches on Wednesdays."),
         "What does my music tutor cost and which day are classes?", ("40",)),
    Case("multi_session", _user("Our accountant is Bernard.", "Bernard's office is on Elm Road.",
                                "Bernard needs the receipts by April."),
         "Where is our bookkeeper's office and when are the receipts due?", ("elm",)),
    Case("multi_session", _user("My godson is Matteo.", "Matteo loves dinosaurs.",
                                "Matteo is turning seven."),
         "What gift would suit my godchild, and what age is he turning?", ("dinosaur",)),
    Case("multi_session", _user("My running partner is Ingrid.", "Ingrid is vegetarian."),
         "What diet does the woman I jog with follow?", ("vegetarian",)),
    Case("multi_session", _user("My old roommate is Kofi.", "Kofi lives in Accra these days.",
                                "Kofi's phone number ends in 4482."),
         "Where is my former flatmate based and what are the last digits of his number?",
         ("accra",)),
    Case("updates", _user("I work at Nordlicht Bank.", "I've been at Nordlicht Bank for six years.",
                          "I started a new job at Solaris Energy this week."),
         "Who is my employer at the moment?", ("solaris",)),
    Case("updates", _user("My flight home is on the 12th.",
                          "The airline rebooked my flight home to the 15th."),
         "Which day do I fly back?", ("15",)),
    Case("updates", _user("Our wifi password is maple-2231.",
                          "I reset the router; the wifi password is now cedar-7710."),
         "What's the current network password?", ("cedar",)),
    Case("updates", _user("My doctor is Dr. Lindqvist.",
                          "Dr. Lindqvist retired, so Dr. Ferreira is my doctor now."),
         "Who is my GP these days?", ("ferreira",)),
    Case("updates", _user("I'm vegetarian.", "I started eating fish again, so I'm pescatarian now."),
         "What's my diet at present?", ("pescatarian",)),
    Case("updates", _user("My daughter's school is Westfield Primary.",
                          "My daughter changed schools and goes to Brookside Academy now."),
         "Which school does my daughter attend?", ("brookside",)),
    Case("abstention", _user("My aunt's name is Rosa."), "What's my uncle called?", ABSTAIN),
    Case("abstention", _user("I ordered a blue kettle online."), "What colour is my toaster?", ABSTAIN),
    Case("abstention", _user("The plumber came on Monday."), "When is the electrician coming?", ABSTAIN),
    Case("abstention", _user("My son's shoe size is 34."), "What shoe size does my wife wear?", ABSTAIN),
    Case("abstention", _user("I renewed my gym card in May."),
         "When does my driving licence expire?", ABSTAIN),
    Case("abstention", _user("Our holiday flat in Crete has two bedrooms."),
         "How many bedrooms does our house in Wales have?", ABSTAIN),
    Case("assistant", _said("Can you open a support ticket about my broken laptop?",
                            "Ticket opened: case HX-3390, a technician will call you."),
         "What was the case ID you created for me?", ("hx-3390", "hx3390"),
         ("Ticket opened: case HX-3390, a technician will call you.",)),
    Case("assistant", _said("Pick a paint colour for the hallway.",
                            "I'd go with Sage Mist, a soft grey-green."),
         "Which shade did you recommend for the corridor?", ("sage",),
         ("I'd go with Sage Mist, a soft grey-green.",)),
    Case("assistant", _said("Find me a train to Leeds tomorrow morning.",
                            "The 07:42 from platform 4 gets you to Leeds at 09:58."),
         "What time was the departure you found for my trip?", ("07:42", "7:42"),
         ("The 07:42 from platform 4 gets you to Leeds at 09:58.",)),
    Case("assistant", _said("How much should I tip on a 64 euro bill?", "A 15% tip would be 9.60 euros."),
         "What gratuity amount did you calculate?", ("9.60", "9,60"),
         ("A 15% tip would be 9.60 euros.",)),
    Case("assistant", _said("Recommend a book for my flight.",
                            "Read 'Piranesi' by Susanna Clarke; it's short and gripping."),
         "Which novel did you tell me to take on the plane?", ("piranesi",),
         ("Read 'Piranesi' by Susanna Clarke; it's short and gripping.",)),
    Case("assistant", _said("Reserve a parking space at the airport.",
                            "Reserved: car park P3, bay 118, from Sunday."),
         "Which bay did you get for my car at the airport?", ("118",),
         ("Reserved: car park P3, bay 118, from Sunday.",)),
]  # fmt: skip

ABILITIES = ("extraction", "multi_session", "updates", "abstention", "assistant")
