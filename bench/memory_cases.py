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

# The held-out half of an earlier session: its failures were looked at, so it is tuning
# material now (TUNING holds both).
SEEN = [
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

TUNING = TUNING + SEEN

# Written in fresh words after the tuning was done; nothing was looked at case by case
# before the figures were taken.
HELD_OUT = [
    Case("extraction", _user("My bike lock combination is 5-0-3-9."),
         "What's the code for the lock on my bicycle?", ("5-0-3-9", "5039")),
    Case("extraction", _user("My allotment in the community garden is plot 46."),
         "Which plot do I have at the shared vegetable garden?", ("46",)),
    Case("extraction", _user("I was born in Tampere, in Finland."),
         "What town do I come from originally?", ("tampere",)),
    Case("extraction", _user("My favourite band is Khruangbin."),
         "Which group do I like listening to most?", ("khruangbin",)),
    Case("extraction", _user("The boiler service is booked for the 9th of December."),
         "When is the heating engineer coming?", ("9th", "december")),
    Case("extraction", _user("My niece studies marine biology in Plymouth."),
         "What subject is my niece taking at university?", ("marine",)),
    Case("multi_session", _user("My brother-in-law is Dmitri.", "Dmitri runs a bakery in Tartu.",
                                "Dmitri's favourite cake is honey cake."),
         "What business does my sister's husband run, and which cake does he like best?",
         ("bakery",)),
    Case("multi_session", _user("My physiotherapist is Lena.", "Lena's clinic is on Harbour Street.",
                                "Lena works only on Tuesdays and Thursdays."),
         "Where is my physio's practice and on which days can I see her?", ("harbour",)),
    Case("multi_session", _user("Our babysitter is Chloe.", "Chloe charges 12 euros an hour.",
                                "Chloe is free on weekends."),
         "How much does the person who minds our kids charge, and when is she available?",
         ("12",)),
    Case("multi_session", _user("My mentor at work is Oluwaseun.",
                                "Oluwaseun recommended that I learn Rust."),
         "Which programming language did my mentor suggest?", ("rust",)),
    Case("multi_session", _user("My great-uncle is Ambrose.", "Ambrose served in the navy.",
                                "Ambrose collects stamps."),
         "Which service was my great-uncle in, and what is his hobby?", ("navy",)),
    Case("multi_session", _user("My language exchange partner is Haruto.",
                                "Haruto is learning Spanish.", "Haruto lives in Nagoya."),
         "Which language is my tandem partner studying, and what city is he in?", ("spanish",)),
    Case("updates", _user("My bus to work is the number 42.",
                          "They cancelled the 42, so I take the number 17 bus now."),
         "Which bus do I catch to the office?", ("17",)),
    Case("updates", _user("I'm reading Middlemarch at the moment.",
                          "I finished Middlemarch and started The Overstory."),
         "What book am I reading currently?", ("overstory",)),
    Case("updates", _user("My salary is 48,000 a year.",
                          "After the promotion my salary went up to 55,000."),
         "How much do I earn per year?", ("55",)),
    Case("updates", _user("Our cleaner comes on Wednesdays.",
                          "The cleaner switched to coming on Fridays."),
         "Which day does our cleaner come?", ("friday",)),
    Case("updates", _user("My hair is long and brown.", "I cut my hair short and dyed it red."),
         "What does my hair look like these days?", ("short", "red")),
    Case("updates", _user("We're planning a holiday in Greece.",
                          "We cancelled Greece and booked a trip to Iceland instead."),
         "Where are we going on holiday?", ("iceland",)),
    Case("abstention", _user("My nephew plays the drums."), "What instrument does my niece play?", ABSTAIN),
    Case("abstention", _user("The car insurance renews in August."),
         "When does my home insurance renew?", ABSTAIN),
    Case("abstention", _user("I had sushi for dinner on Friday."),
         "What did I eat for lunch on Sunday?", ABSTAIN),
    Case("abstention", _user("My manager's office is on the fourth floor."),
         "Which floor is the cafeteria on?", ABSTAIN),
    Case("abstention", _user("We painted the kitchen yellow."), "What colour is our bathroom?", ABSTAIN),
    Case("abstention", _user("My phone is a Pixel 7."), "What brand is my laptop?", ABSTAIN),
    Case("assistant", _said("Pick a strong password for my router.",
                            "Use granite-owl-5718 as the new router password."),
         "What passphrase did you come up with for my internet box?", ("granite",),
         ("Use granite-owl-5718 as the new router password.",)),
    Case("assistant", _said("How long should I boil an egg for a runny yolk?",
                            "Six minutes in boiling water gives a runny yolk."),
         "How many minutes did you say for a soft egg?", ("six", "6"),
         ("Six minutes in boiling water gives a runny yolk.",)),
    Case("assistant", _said("Translate thank you into Finnish.", "In Finnish it is kiitos."),
         "What was the Finnish word for thanks you gave me?", ("kiitos",),
         ("In Finnish it is kiitos.",)),
    Case("assistant", _said("Book me a haircut for next week.",
                            "Booked with Marco at Clip Joint on Tuesday at 17:00."),
         "Who is cutting my hair, according to the appointment you made?", ("marco",),
         ("Booked with Marco at Clip Joint on Tuesday at 17:00.",)),
    Case("assistant", _said("What wine goes with lamb?", "A Rioja Reserva pairs well with roast lamb."),
         "Which bottle did you suggest to drink with the meat?", ("rioja",),
         ("A Rioja Reserva pairs well with roast lamb.",)),
    Case("assistant", _said("Work out my monthly mortgage payment.",
                            "Your monthly payment comes to 1,142 euros."),
         "What monthly figure did you calculate for the home loan?", ("1,142", "1142"),
         ("Your monthly payment comes to 1,142 euros.",)),
]  # fmt: skip

# The catch-up's held-out facts (fact, question sharing words, paraphrase sharing none),
# written with HELD_OUT; bench/memory_facts.py's first twenty are its tuning half.
CATCH_UP_HELD_OUT = [
    ("I left my umbrella at the Italian restaurant on Friday.", "Where did I leave my umbrella?",
     "At which eatery did I forget the thing that keeps off rain?"),
    ("My son's football practice is on Wednesday evenings.", "When is my son's football practice?",
     "Which night does my boy train for soccer?"),
    ("The garage door code is 7734.", "What is the garage door code?",
     "Which digits open the place where the car sleeps?"),
    ("We bought the house on Maple Avenue in 2019.", "When did we buy the house on Maple Avenue?",
     "In what year did we acquire our home?"),
    ("My insurance policy number is PL-77120.", "What is my insurance policy number?",
     "Which reference identifies my cover contract?"),
    ("The piano tuner visits every October.", "When does the piano tuner visit?",
     "In which month does the instrument technician come?"),
    ("I lent my ladder to Pieter next door.", "Who did I lend my ladder to?",
     "Which neighbour borrowed my climbing steps?"),
    ("My daughter's teacher is Ms. Abernathy.", "Who is my daughter's teacher?",
     "What's the name of the woman who instructs my girl at school?"),
    ("The water meter is behind the cupboard under the stairs.", "Where is the water meter?",
     "Where can I read how much tap usage we have?"),
    ("I need to renew my driving licence before June.", "When must I renew my driving licence?",
     "By which month should my motoring permit be replaced?"),
    ("The best pizza in town is at Luigi's on Canal Street.", "Where is the best pizza in town?",
     "Which place serves the finest Neapolitan pies around here?"),
    ("My grandfather fought at Arnhem in 1944.", "Where did my grandfather fight?",
     "In which battle did my granddad serve?"),
    ("Our recycling is collected every other Tuesday.", "When is our recycling collected?",
     "How often do the bin men take away our sorted waste?"),
    ("I'm lactose intolerant, so I drink soy milk.", "Which milk do I drink?",
     "What dairy alternative suits my stomach?"),
    ("The spare charger is in the top drawer of my desk.", "Where is the spare charger?",
     "Where did I put the extra power cable?"),
    ("My mother-in-law arrives on the 3rd by train.", "When does my mother-in-law arrive?",
     "What date is my wife's mum coming?"),
    ("The company offsite is in Ghent this year.", "Where is the company offsite this year?",
     "In which Belgian city is the team retreat?"),
    ("My vaccination booster is due in September.", "When is my vaccination booster due?",
     "In which month should I get the next jab?"),
    ("I keep my running shoes in the car boot.", "Where do I keep my running shoes?",
     "Where are my jogging trainers stored?"),
    ("The broken window in the attic was fixed by Glassworks Ltd.",
     "Who fixed the broken window in the attic?", "Which firm repaired the pane up in the loft?"),
]  # fmt: skip

ABILITIES = ("extraction", "multi_session", "updates", "abstention", "assistant")
