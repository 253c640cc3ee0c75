"""The facts of ``bench/memory.py``: what a user tells once, and two questions about it
asked much later, one that shares words with the fact and one that shares none (a
paraphrase: no content word in common, not even by stem)."""

# (fact, question sharing words, paraphrased question)
FACTS: list[tuple[str, str, str]] = [
    (
        "I parked the car on level 3, spot C-42.",
        "Which spot did I park the car in?",
        "Where did I leave my vehicle?",
    ),
    (
        "My sister's birthday is on the 14th of March.",
        "When is my sister's birthday?",
        "On what date was my female sibling born?",
    ),
    (
        "The wifi password at home is tulip-9981.",
        "What is the wifi password at home?",
        "How do I get my laptop online in our house? What's the network secret?",
    ),
    (
        "I'm allergic to penicillin, so please never suggest it.",
        "Which drug am I allergic to?",
        "What antibiotic makes me sick?",
    ),
    (
        "We adopted a cat called Miso last spring.",
        "What is our cat called?",
        "What name did we give the kitten we took in?",
    ),
    (
        "I keep the spare key under the blue flowerpot by the door.",
        "Where do I keep the spare key?",
        "Where is the extra house opener hidden?",
    ),
    (
        "My dentist appointment is on Thursday at 10:30 with Dr. Okafor.",
        "When is my dentist appointment?",
        "At what time must I see the tooth doctor?",
    ),
    (
        "Our flight to Lisbon leaves from gate B12 at 7:15.",
        "Which gate does our flight to Lisbon leave from?",
        "Where do we board the plane to Portugal?",
    ),
    (
        "The invoice number for the roof repair is INV-20931.",
        "What was the invoice number for the roof repair?",
        "Which bill reference belongs to fixing the house top?",
    ),
    (
        "My favourite colour is teal, not green.",
        "What is my favourite colour?",
        "Which hue do I like best?",
    ),
    (
        "The locker code at the gym is 4821.",
        "What is the locker code at the gym?",
        "Which digits open my storage box at the fitness centre?",
    ),
    (
        "I started learning the cello in January.",
        "When did I start learning the cello?",
        "Since which month have I been taking lessons on a string instrument?",
    ),
    (
        "My daughter Lina is allergic to peanuts.",
        "What is my daughter Lina allergic to?",
        "Which nut must my girl avoid?",
    ),
    (
        "The meeting with the landlord was moved to Friday at 4 pm.",
        "When is the meeting with the landlord?",
        "What day do I see the owner of my flat?",
    ),
    (
        "I buried the time capsule next to the old oak tree in the backyard.",
        "Where did I bury the time capsule?",
        "Where was the memory box put into the ground?",
    ),
    (
        "My passport expires on 2 September 2027.",
        "When does my passport expire?",
        "Until what date is my travel document valid?",
    ),
    (
        "The plumber's phone number is 0176 5550 1234.",
        "What is the plumber's phone number?",
        "How can I call the person who repairs pipes?",
    ),
    (
        "I lent my ladder to our neighbour Mr. Brandt.",
        "Who did I lend my ladder to?",
        "Which person next door borrowed the thing I climb on?",
    ),
    (
        "My blood type is O negative.",
        "What is my blood type?",
        "Which group does the red fluid in my veins belong to?",
    ),
    (
        "The book club reads 'The Remains of the Day' this month.",
        "Which book does the book club read this month?",
        "What novel is our literature circle discussing currently?",
    ),
    (
        "I hid the birthday presents in the attic behind the suitcases.",
        "Where did I hide the birthday presents?",
        "Where are the gifts concealed up under the roof?",
    ),
    (
        "Our internet provider's customer number is 88-4410-73.",
        "What is our internet provider's customer number?",
        "Which account id do we have with the broadband company?",
    ),
    (
        "My grandmother's maiden name was Kowalski.",
        "What was my grandmother's maiden name?",
        "What surname did granny have before she married?",
    ),
    (
        "I run 5 kilometres every Tuesday and Saturday morning.",
        "How far do I run on Tuesday and Saturday?",
        "What distance do I jog twice weekly?",
    ),
    (
        "The recycling bins are collected every second Wednesday.",
        "When are the recycling bins collected?",
        "How often does the waste truck pick up the paper and plastic?",
    ),
    (
        "My car's licence plate is HH-KL 2048.",
        "What is my car's licence plate?",
        "Which registration is written on my automobile?",
    ),
    (
        "I was born in Porto but grew up in Hamburg.",
        "Where was I born?",
        "Which city is my hometown by birth?",
    ),
    (
        "The piano tuner comes on the 3rd of every month.",
        "When does the piano tuner come?",
        "On which day is the keyboard instrument adjusted?",
    ),
    (
        "My boss prefers reports as PDF, never as Word files.",
        "In which format does my boss prefer reports?",
        "How does my manager want documents delivered?",
    ),
    (
        "The safe in the study opens with 19-07-63.",
        "What opens the safe in the study?",
        "What's the combination for the strongbox in my office at home?",
    ),
    (
        "I planted tomatoes, basil and courgettes in the raised bed.",
        "What did I plant in the raised bed?",
        "Which vegetables and herbs are growing in my garden box?",
    ),
    (
        "Our wedding anniversary is on the 21st of June.",
        "When is our wedding anniversary?",
        "Which day did my spouse and I marry?",
    ),
    (
        "The spare tyre is in the boot under the floor panel.",
        "Where is the spare tyre?",
        "Where can the extra wheel be found in the automobile?",
    ),
    (
        "I take my blood pressure pill, ramipril, every morning.",
        "Which blood pressure pill do I take?",
        "What medication do I swallow each day after waking?",
    ),
    (
        "My son's football training is on Mondays at 5 pm.",
        "When is my son's football training?",
        "At what time does my boy practise soccer?",
    ),
    (
        "The electricity meter reading was 48213 in December.",
        "What was the electricity meter reading?",
        "How many units did the power counter show at year end?",
    ),
    (
        "I stored the winter clothes in vacuum bags under the bed.",
        "Where did I store the winter clothes?",
        "Where are my cold-season garments packed away?",
    ),
    (
        "Our holiday cottage in Cornwall is booked for the first week of August.",
        "When is the holiday cottage in Cornwall booked?",
        "For which days have we reserved the vacation house in England's southwest?",
    ),
    (
        "My library card number is 2299 1034.",
        "What is my library card number?",
        "Which id do I use to borrow books?",
    ),
    (
        "The printer in the office needs HP 305 ink cartridges.",
        "Which ink cartridges does the printer in the office need?",
        "What refills does our workplace copier machine take?",
    ),
    (
        "I owe Jonas 35 euros for the concert tickets.",
        "How much do I owe Jonas for the concert tickets?",
        "What sum is my debt to my friend for the gig?",
    ),
    (
        "My doctor said I should avoid grapefruit with my medication.",
        "Which fruit should I avoid with my medication?",
        "What citrus is forbidden alongside my pills?",
    ),
    (
        "The kids' school starts at 7:55 and ends at 13:20.",
        "When does the kids' school start?",
        "At what time do classes begin for the children?",
    ),
    (
        "Our dog Bruno needs his worming tablet every three months.",
        "How often does Bruno need his worming tablet?",
        "How frequently must our pet take the parasite medicine?",
    ),
    (
        "I keep my bike lock combination simple: 7-7-3-1.",
        "What is my bike lock combination?",
        "Which numbers release the chain on my bicycle?",
    ),
    (
        "The quarterly tax payment of 1,240 euros is due on 15 November.",
        "When is the quarterly tax payment due?",
        "By which date must the levy instalment reach the authorities?",
    ),
    (
        "My mother's flight lands at 18:40 at terminal 2.",
        "When does my mother's flight land?",
        "At what hour does mum arrive at the airport?",
    ),
    (
        "The hiking trail we liked starts at the car park behind the mill.",
        "Where does the hiking trail start?",
        "From where does the walking path we enjoyed begin?",
    ),
    (
        "I set the thermostat to 20 degrees during the day and 17 at night.",
        "What is the thermostat set to at night?",
        "How warm do I keep the heating while sleeping?",
    ),
    (
        "The password hint for my old email is 'first pet plus street number'.",
        "What is the password hint for my old email?",
        "What clue helps me remember the login for my former mailbox?",
    ),
    (
        "My coffee order is a flat white with oat milk.",
        "What is my coffee order?",
        "Which drink do I usually get at the cafe?",
    ),
    (
        "The broken washing machine is a Bosch Serie 6, model WAU28T40.",
        "Which model is the broken washing machine?",
        "What make is the laundry appliance that stopped working?",
    ),
    (
        "I promised to water Ana's plants while she is in Peru.",
        "Whose plants did I promise to water?",
        "Which friend's greenery am I looking after during her trip to South America?",
    ),
    (
        "The car insurance renews on the 1st of April for 412 euros.",
        "When does the car insurance renew?",
        "When is the automobile coverage up for another year?",
    ),
    (
        "We keep the first aid kit in the kitchen drawer left of the oven.",
        "Where do we keep the first aid kit?",
        "Where are the bandages and plasters for emergencies?",
    ),
    (
        "My shoe size is 43 in European sizes.",
        "What is my shoe size?",
        "How big are my feet in EU numbers?",
    ),
    (
        "The garage door remote needs a CR2032 battery.",
        "Which battery does the garage door remote need?",
        "What cell powers the opener for where the car sleeps?",
    ),
    (
        "Grandpa's watch was repaired by the jeweller on Elm Street.",
        "Who repaired grandpa's watch?",
        "Which shop fixed my grandfather's timepiece?",
    ),
    (
        "I cancelled the gym membership effective end of May.",
        "When does my gym membership end?",
        "Until when can I still use the fitness club?",
    ),
    (
        "The Wi-Fi router is hidden behind the bookshelf in the hallway.",
        "Where is the Wi-Fi router?",
        "Where is the box that provides our wireless network?",
    ),
]
